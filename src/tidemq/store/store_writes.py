"""The store's write calls (MessageStore's part for puts): the refusal rule, put / put_batch /
put_encoded / put_slices, and the puts that do not wait (``wait=False``: when_durable, settle_put).
Each delegates to the writer (writer.py) once the store runs; before that, or once it stopped, the
puts answer SERVICE_NOT_AVAILABLE with the state's reason (``NOT_SERVING``)."""

from __future__ import annotations

from typing import Callable, Sequence

from .record_loop import SLICE_FIELDS
from .types import Message, PutReason, PutResult, PutResults, StoreNotRunning, StoreState

# why puts are refused in a state without a writer or once it stopped (reason, text)
NOT_SERVING = {
    StoreState.NEW: (PutReason.NOT_RUNNING, "store not started"),
    StoreState.STARTING: (PutReason.NOT_RUNNING, "store is starting"),
    StoreState.STOPPING: (PutReason.SHUTTING_DOWN, "store is shutting down"),
    StoreState.STOPPED: (PutReason.NOT_RUNNING, "store is stopped"),
    StoreState.KILLED: (PutReason.NOT_RUNNING, "store was killed"),
    StoreState.FAILED: (PutReason.NOT_RUNNING, "store failed to start"),
}


class StoreWrites:
    """MessageStore's write calls (a part of its class: store.py builds what they use)."""

    @property
    def refusal(self) -> str | None:
        """Why the store refuses puts on its own account (not started, shutting down, stopped,
        killed), or None while it runs. Setting a text refuses puts with it, as a stopped
        store does (a test's hold); None lifts it."""
        w = self.writer
        if w is None:
            return NOT_SERVING[self._state][1]
        return w.stopped[1] if w.stopped is not None else None

    @refusal.setter
    def refusal(self, text: str | None) -> None:
        if self.writer is None:
            raise StoreNotRunning(self._state, "refusal")
        self.writer.stopped = None if text is None else (PutReason.NOT_RUNNING, text)

    def put_refusal(self) -> tuple[PutReason, str] | None:
        """Why puts are refused right now, (reason, text), or None: the verdict every put starts with."""
        w = self.writer
        if w is None:
            return NOT_SERVING[self._state]
        return w.refusal()

    def write_refusal(self) -> str | None:
        """Why puts are refused right now (for humans), or None."""
        why = self.put_refusal()
        return why[1] if why is not None else None

    def _refused(self, n: int) -> PutResults:
        return PutResults.all_refused(n, PutResult.refused(*NOT_SERVING[self._state]))

    def put(self, msg: Message) -> PutResult:
        w = self.writer
        if w is None:
            return self._refused(1)[0]
        return w.put_batch([msg])[0]

    def put_batch(self, msgs: Sequence[Message], defer_dispatch: bool = False, wait: bool = True) -> PutResults:
        """Put many messages with one lock, one append pass and one flush wait.
        Returns one PutResult per message, in order (writer.py). ``defer_dispatch``: their
        consume-queue units and index entries are written when the put lock is next taken, before
        any read, or at ``drain_dispatch()``, whichever comes first (put_lock.py). ``wait`` False:
        return once appended, without waiting for what the acknowledgement needs (SYNC_FLUSH's fsync,
        SYNC replication): ``results.pending_end`` >= 0 then, and the results say PUT_OK only once
        ``settle_put`` has run (after ``when_durable``'s release): a caller on an event loop awaits the
        fsync there instead of holding a thread (broker/puts.py)."""
        w = self.writer
        if w is None:
            return self._refused(len(msgs))
        return w.put_batch(msgs, defer_dispatch, wait)

    def put_encoded(self, topic: str, entries: Sequence[tuple], born_ms: int | None = None,
                    born_host: str | None = None, sys_flag: int = 0, defer_dispatch: bool = False,
                    wait: bool = True) -> PutResults:
        """Put messages of one topic whose properties are already encoded (the broker's one-message
        SendMessage): see StoreWriter.put_encoded; ``wait``: see put_batch."""
        w = self.writer
        if w is None:
            return self._refused(len(entries))
        return w.put_encoded(topic, entries, born_ms, born_host, sys_flag, defer_dispatch, wait)

    def put_one(self, topic: str, entry: tuple, born_ms: int | None = None, born_host: str | None = None,
                sys_flag: int = 0) -> tuple[int, int] | None:
        """``put_encoded(topic, (entry,), ..., defer_dispatch=True)``'s common case in one call: (queue
        offset, physical offset) of the message stored, or None, having done nothing: put_encoded
        then (StoreWriter.put_one says where it declines)."""
        w = self.writer
        return w.put_one(topic, entry, born_ms, born_host, sys_flag) if w is not None else None

    def put_slices(self, topic: str, data, fields, extra: bytes = b"", skip=None, born=None,
                   wait: bool = True) -> PutResults:
        """Put messages of one topic given as slices of one buffer (the broker's SendRecords path, and
        SendMessage's batches read by the compiled lane): see StoreWriter.put_slices; ``wait``: see put_batch."""
        w = self.writer
        if w is None:
            return self._refused(memoryview(fields).nbytes // (4 * SLICE_FIELDS))
        return w.put_slices(topic, data, fields, extra, skip, born, wait)

    # Puts that do not wait (put_*(..., wait=False)): the caller waits for the fsync its own way ------
    def when_durable(self, end: int, release: Callable[[], None]):
        """After a put made with ``wait=False`` (``end``: its ``results.pending_end``): ``release()`` is
        called from the group commit's thread, holding its lock (so: only hand over, e.g.
        ``loop.call_soon_threadsafe``), once everything before ``end`` is durable, an fsync that
        covered it failed, or the service ended. None when that is known already (``release`` is
        never called: settle at once); else a handle for ``forget_durable`` (a wait given up)."""
        gc = self.group_commit
        return gc.when_durable(end, release) if gc is not None else None

    def forget_durable(self, handle) -> None:
        """``when_durable``'s wait given up (its timeout, a cancelled caller)."""
        if handle is not None and self.group_commit is not None:
            self.group_commit.forget(handle)

    def settle_put(self, results: PutResults, replicas=None) -> PutResults:
        """Complete a put made with ``wait=False`` from what is durable now: PUT_OK once its records
        are on disk (SYNC_FLUSH), FLUSH_DISK_FAILED (final, log_failure.py) or FLUSH_DISK_TIMEOUT, as
        the waiting put would have answered; SYNC replication is asked without waiting (a caller on
        an event loop first awaits the followers: ``replicas``, the writer's ``replicas`` when it
        appended, ``when_confirmed``; broker/puts.py)."""
        end = results.pending_end
        w = self.writer
        if end < 0 or w is None:
            return results
        gc = self.group_commit
        w.settle(results, end, gc.outcome(end) if gc is not None else None, 0.0, replicas)
        return results

    @property
    def puts_wait_for_disk_only(self) -> bool:
        """SYNC_FLUSH with no SYNC replication: a put's acknowledgement waits for the group commit's
        fsync and nothing else (``when_durable``; SYNC replication's waits are the followers' acks:
        broker/puts.py)."""
        if not self.config.sync_flush:
            return False
        rep = self.writer.replicas if self.writer is not None else None
        return rep is None or not rep.sync
