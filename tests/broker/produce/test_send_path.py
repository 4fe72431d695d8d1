"""broker/send.py's put_code: every store outcome (status and typed reason) as the protocol
code the official clients react to, decided by the reason, never by the error text."""

import pytest

from tidemq.protocol.stubs import Code
from tidemq.broker.produce.send_path import put_code
from tidemq.store import PutReason, PutResult, PutStatus

CODE_OF = {
    PutReason.FLUSH_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    PutReason.DISK_FULL: Code.TOO_MANY_REQUESTS,
    PutReason.ARCHIVE_PENDING: Code.TOO_MANY_REQUESTS,
    PutReason.UNCONSUMED_BACKLOG: Code.TOO_MANY_REQUESTS,
    PutReason.NOT_RUNNING: Code.INTERNAL_SERVER_ERROR,
    PutReason.SHUTTING_DOWN: Code.INTERNAL_SERVER_ERROR,
    PutReason.DISPATCH_ERROR: Code.INTERNAL_SERVER_ERROR,
    PutReason.WRITE_ERROR: Code.INTERNAL_SERVER_ERROR,
    PutReason.FLUSH_FAILED: Code.INTERNAL_SERVER_ERROR,     # final: a resend must store it again (the lead maps it)
    PutReason.TOPIC_CREATE_FAILED: Code.INTERNAL_SERVER_ERROR,
    PutReason.INVALID_TOPIC: Code.ILLEGAL_TOPIC,
    PutReason.TOPIC_NOT_FOUND: Code.TOPIC_NOT_FOUND,
    PutReason.BODY_TOO_LARGE: Code.MESSAGE_BODY_TOO_LARGE,
    PutReason.PROPERTIES_TOO_LARGE: Code.MESSAGE_PROPERTIES_TOO_LARGE,
    PutReason.RECORD_TOO_LARGE: Code.BAD_REQUEST,
    PutReason.BAD_BODY: Code.BAD_REQUEST,
    PutReason.BAD_QUEUE_ID: Code.BAD_REQUEST,
    PutReason.BAD_PROPERTY: Code.BAD_REQUEST,
    PutReason.BAD_FIELD: Code.BAD_REQUEST,
    PutReason.ENCODE_FAILED: Code.BAD_REQUEST,
    PutReason.NOT_LEADER: Code.FORBIDDEN,
    PutReason.REPLICAS_NOT_ENOUGH: Code.HA_NOT_AVAILABLE,
    PutReason.REPLICA_LOST: Code.SLAVE_PERSISTENCE_TIMEOUT,     # appended: its resend is not stored twice
    PutReason.REPLICATION_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutReason.LEASE_EXPIRED: Code.INTERNAL_SERVER_ERROR,          # retried: the next try finds the leader
}


def test_every_reason_has_a_code():
    assert set(CODE_OF) == set(PutReason)


@pytest.mark.parametrize("reason", list(PutReason), ids=lambda r: r.name)
def test_the_code_follows_the_reason_not_the_text(reason):
    for text in ("disk full: a text that says otherwise", "invalid topic", "exceeds message_body_bytes_max", ""):
        r = PutResult.refused(reason, text)
        assert put_code(r.status, r.reason) == CODE_OF[reason], text
        assert put_code(r[0], r[9]) == CODE_OF[reason]          # as send_records reads a result


def test_ok_and_results_without_a_reason():
    assert put_code(PutStatus.PUT_OK, None) == Code.OK
    assert put_code(PutStatus.FLUSH_DISK_TIMEOUT, None) == Code.MASTER_PERSISTENCE_TIMEOUT
    assert put_code(PutStatus.PROPERTIES_SIZE_EXCEEDED, None) == Code.MESSAGE_PROPERTIES_TOO_LARGE
    assert put_code(PutStatus.TOPIC_NOT_FOUND, None) == Code.TOPIC_NOT_FOUND
    assert put_code(PutStatus.MESSAGE_ILLEGAL, None) == Code.BAD_REQUEST
    assert put_code(PutStatus.SERVICE_NOT_AVAILABLE, None) == Code.INTERNAL_SERVER_ERROR
    assert put_code(PutStatus.UNKNOWN_ERROR, None) == Code.INTERNAL_SERVER_ERROR


def test_a_send_during_a_change_of_role_answers_a_typed_status_and_puts_nothing(tmp_path):
    """A change of role closes the old service's put pool (server.activate) while a SendMessage may
    still be on its way through it: the send is answered INTERNAL_SERVER_ERROR (clients send it
    again, to the leader of the moment), nothing is stored, no exception leaves the send path."""
    import asyncio

    from tidemq.broker.produce.batch import Caller, Messages, SendBatch
    from tidemq.broker.service import MessagingService
    from tidemq.config import BrokerConfig
    from tidemq.protocol.stubs import MessageType
    from tidemq.store import Message, MessageStore
    from tidemq.testing.faulty_io import FaultyFileIO

    from tests.support.store import memory_config

    store = MessageStore(memory_config(flush_disk_type="SYNC_FLUSH", sync_flush_timeout_ms=60_000),
                         FaultyFileIO()).start()
    store.create_topic("T", 1)
    svc = MessagingService(store, BrokerConfig())
    assert store.puts_may_wait
    svc.puts.close()                            # what activate() does to the service it replaces
    msgs = [Message(topic="T", body=b"m%d" % i) for i in range(2)]
    batch = SendBatch(2, Messages(msgs, [MessageType.NORMAL] * 2, ["", ""], [None, None]), lambda i: "", 4,
                      topic="T")
    try:
        v = asyncio.run(svc.sends.send(batch, Caller("127.0.0.1:1", "c1", lambda: None)))
        assert v.codes == [Code.INTERNAL_SERVER_ERROR] * 2
        assert store.max_offset("T", 0) == 0
    finally:
        svc.close()
        store.shutdown()
