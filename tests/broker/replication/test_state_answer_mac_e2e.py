"""The leader's state answer is authenticated end to end (replication/state.py sign_answer/open_answer):
a leader and a follower with authentication on and TLS off, the follower's member channel through a
man in the middle that speaks gRPC (it reads and rewrites the STATE answer, its frames re-encoded with
good CRCs: a CRC is no MAC). Changing a user's flag in the copy, or sending an older answer again, is
refused by the follower (counted, nothing of it applied). Before, the follower applied either: only the
secrets in the copy were sealed, the rest of it was whoever's on the way."""

from concurrent import futures

import grpc
import pytest

from tidemq.client import admin
from tidemq.protocol import replication as rp
from tidemq.protocol.stubs import Code, pb, sgrpc, spb

from ...support.auth import AUTH
from ...support.wait import PATIENCE_S, wait_until
from .test_state_secrets_e2e import ALICE, SUPER, md


class GrpcMitm:
    """A gRPC server forwarding the member channel's calls to ``target`` (bytes as they are, the caller's
    signed metadata passed on), except the STATE answer: ``mode`` "tamper" makes alice super in it once
    she is there; "replay" hands every State call after the first the first call's answer."""

    def __init__(self, target: str, mode: str) -> None:
        self.mode = mode
        self.recorded: list[bytes] | None = None
        self.tampered = 0
        self.replayed = 0
        self.up = grpc.insecure_channel(target)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self.server.add_generic_rpc_handlers([self])
        self.endpoint = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    @staticmethod
    def _md(context):
        return tuple((k, v) for k, v in context.invocation_metadata() if not k.startswith(("grpc-", ":"))
                     and k != "user-agent")

    def service(self, details):
        path = details.method
        if path == rp.STATE_PATH:
            return grpc.unary_stream_rpc_method_handler(self._state)
        if path == rp.EPOCHS_PATH:
            return grpc.unary_unary_rpc_method_handler(
                lambda req, ctx: self.up.unary_unary(path)(req, metadata=self._md(ctx), timeout=PATIENCE_S))
        if path == rp.STREAM_PATH:
            return grpc.stream_stream_rpc_method_handler(
                lambda reqs, ctx: self.up.stream_stream(path)(reqs, metadata=self._md(ctx)))
        return None

    def _state(self, request, context):
        if self.mode == "replay" and self.recorded is not None:
            self.replayed += 1
            yield from self.recorded
            return
        frames = list(self.up.unary_stream(rp.STATE_PATH)(request, metadata=self._md(context), timeout=PATIENCE_S))
        if self.mode == "replay":
            self.recorded = frames
            yield from frames
            return
        whole = rp.StateAssembler(1 << 30)
        raw = None
        for fr in frames:
            raw = whole.add(rp.decode(fr)) or raw
        head, sep, body = raw.partition(b"\n") if raw.startswith(b"mac1:") else (b"", b"", raw)
        doc = rp.loads(body)
        users = ((doc.get("state") or {}).get("acl") or {}).get("users") or {}
        if ALICE[0] not in users:
            yield from frames
            return
        users[ALICE[0]]["super"] = True             # the man in the middle makes alice a super user
        self.tampered += 1
        epoch = rp.decode(frames[0]).epoch
        yield from rp.state_frames(head + sep + rp.dumps(doc), epoch, 1 << 20)

    def close(self) -> None:
        self.server.stop(0).wait()
        self.up.close()


def _replica(follower) -> dict:
    r = admin.call(follower.endpoint, "Replication", {}, timeout_s=PATIENCE_S, metadata=md(SUPER))
    return r["replication"]["replica"]


def _alice_known_on(follower) -> bool:
    with grpc.insecure_channel(follower.endpoint) as ch:
        st = sgrpc.MessagingServiceStub(ch).QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="T")), metadata=md(ALICE), timeout=PATIENCE_S).status
    return st.code != Code.UNAUTHORIZED


@pytest.mark.parametrize("mode", ["tamper", "replay"])
def test_a_changed_or_replayed_state_answer_is_refused(tmp_path, broker_factory, mode):
    env = {**AUTH, "TIDEMQ_REPLICATION_MODE": "ASYNC", "TIDEMQ_REPLICATION_STATE_INTERVAL_MS": "100"}
    leader = broker_factory(root=str(tmp_path / "l"), env={**env, "TIDEMQ_BROKER_ID": "g-0"},
                            args=["--group", "g", "--role", "leader"])
    mitm = GrpcMitm(f"127.0.0.1:{leader.port}", mode)
    try:
        follower = broker_factory(root=str(tmp_path / "f"), env={**env, "TIDEMQ_BROKER_ID": "g-1"},
                                  args=["--group", "g", "--role", "follower", "--leader", mitm.endpoint])
        wait_until(lambda: _replica(follower)["state_copies"] >= 1 or None,
                   "a first, genuine copy went through the man in the middle and was applied")
        r = admin.call(leader.endpoint, "CreateUser", {"name": ALICE[0], "secret_key": ALICE[1]},
                       timeout_s=PATIENCE_S, metadata=md(SUPER))
        assert r["ok"], r
        copies = _replica(follower)["state_copies"]

        def refused_twice_or_applied():
            rep = _replica(follower)
            return (rep.get("state_copies_refused", 0) >= 2 or rep["state_copies"] >= copies + 2
                    or _alice_known_on(follower) or None)

        wait_until(refused_twice_or_applied, "the follower refused the changed answers, or applied them")
        assert not _alice_known_on(follower), "the follower applied a state answer changed or replayed on the way"
        rep = _replica(follower)
        assert rep["state_copies_refused"] >= 2
        assert rep["state_copies"] == copies, "nothing was applied after the man in the middle began"
        assert (mitm.tampered if mode == "tamper" else mitm.replayed) >= 2
    finally:
        mitm.close()
