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
