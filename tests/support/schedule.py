"""The order in which the suite's test files go to the xdist workers: the longest first.

``./run-tests`` runs whole files on two workers (``--dist loadfile``: a file's module fixtures
and its Spark or broker set-up stay in one process). xdist hands the files out in the order of
its queue, by default the files with the most tests first, and a worker takes the next file
when it is nearly done with its own. A file of 300 quick seeds then comes before one of four
Spark jobs of a minute each, and the run ends with one worker busy on a long file while the
other has nothing left: the suite takes as long as the busier worker. Handing out the longest
files first (the classic longest-processing-time rule) leaves the short ones to fill in at the
end, so the two workers finish together.

How long a file takes is what the runs on this checkout measured (pytest's cache, key
``tidemq/file_seconds``: the controller adds each file's time at the end of every distributed
run), else ``FILE_SECONDS`` below (a fresh clone, CI), else a guess from its number of tests.
Only the order changes: which tests run, and how, does not.
"""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling

CACHE_KEY = "tidemq/file_seconds"

# seconds per file (set-up, calls and tear-down of its tests on one worker, the whole suite running
# on 2 busy CPUs; refresh from .pytest_cache/v/tidemq/file_seconds after a full run); files not
# named here are weighed by their number of tests (SECONDS_PER_TEST each)
FILE_SECONDS: dict[str, float] = {
    # measured: the whole suite (2,411 tests, 2 workers) on 2 CPUs busy with other work (load 13-22),
    # 2026-11-28 (.pytest_cache/v/tidemq/file_seconds, files of 8 s or more); its JVMs still with C2
    "tests/spark/test_cluster.py": 737, "tests/spark/test_source.py": 365, "tests/spark/test_tiered.py": 283,
    "tests/spark/test_jar.py": 197, "tests/spark/test_stream.py": 186, "tests/spark/test_sink.py": 173,
    "tests/spark/test_source_secured.py": 156, "tests/spark/test_jvm.py": 136,
    "tests/spark/test_init.py": 121, "tests/spark/test_failover.py": 93,
    "tests/broker/replication/test_partitions_e2e.py": 79, "tests/sim/test_group_sim.py": 78,
    "tests/broker/replication/test_static_e2e.py": 67, "tests/spark/test_archive.py": 58,
    "tests/spark/test_tiered_jvm.py": 51, "tests/broker/observe/test_http_e2e.py": 47,
    "tests/sim/test_store_sim.py": 47, "tests/test_accel.py": 44, "tests/cli/test_archive.py": 42,
    "tests/broker/consume/test_receive_e2e.py": 41, "tests/broker/test_damage_e2e.py": 40,
    "tests/store/test_disk_tmpfs.py": 35, "tests/broker/replication/test_failover_e2e.py": 33,
    "tests/broker/observe/test_page_browser.py": 30, "tests/broker/state/test_damaged_state_e2e.py": 25,
    "tests/store/test_heal.py": 24, "tests/record/test_codec_scan_run.py": 19,
    "tests/cli/test_replication.py": 18, "tests/filter/test_evaluate.py": 18, "tests/cli/test_clean.py": 16,
    "tests/broker/protection/test_alarms_e2e.py": 15, "tests/spark/test_entry.py": 14,
    "tests/broker/produce/test_send_message_e2e.py": 14, "tests/record/test_codec.py": 13,
    "tests/cli/test_topic.py": 13, "tests/broker/deferred/test_timer_e2e.py": 12,
    "tests/broker/produce/test_send_records_e2e.py": 12, "tests/broker/replication/test_disk_full_e2e.py": 11,
    "tests/cli/test_serve.py": 11, "tests/broker/observe/test_console_browser.py": 10,
    "tests/broker/multi/test_supervisor_e2e.py": 10, "tests/broker/consume/test_damaged_records_e2e.py": 10,
    "tests/broker/consume/test_renew_e2e.py": 9, "tests/broker/deferred/test_transactions_e2e.py": 9,
    "tests/broker/deferred/test_recall_e2e.py": 9, "tests/deploy/test_prometheus_e2e.py": 9,
    "tests/store/test_store.py": 8,
}
SECONDS_PER_TEST = 0.2


class LongestFileFirst(LoadFileScheduling):
    """LoadFileScheduling whose queue of files is ordered by expected time, longest first."""

    def __init__(self, config, log=None, seconds: dict[str, float] | None = None) -> None:
        super().__init__(config, log)
        self.seconds = dict(FILE_SECONDS)
        self.seconds.update(seconds or {})
        self._ordered = False

    def weight(self, scope: str, tests: int) -> float:
        return self.seconds.get(scope, tests * SECONDS_PER_TEST)

    def _reschedule(self, node) -> None:
        """As LoadFileScheduling's, but a worker is handed its next file only once the last test of
        its file is pending (the one it holds back until it knows what comes next), not two: a
        Spark file of two long tests no longer claims the next file as soon as it starts."""
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        self._assign_work_unit(node)

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:          # the queue is complete before its first unit is handed out
            units = sorted(self.workqueue.items(), key=lambda kv: -self.weight(kv[0], len(kv[1])))
            self.workqueue.clear()
            self.workqueue.update(units)
            self._ordered = True
        super()._assign_work_unit(node)


class FileClock:
    """On the controller: each file's summed test durations (set-up, call, tear-down) in this run,
    added to the cache's at the end (files this run did not touch keep their time)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, nodeid: str, duration: float) -> None:
        f = nodeid.split("::", 1)[0]
        self.seconds[f] = self.seconds.get(f, 0.0) + duration

    def save(self, cache) -> None:
        if self.seconds:
            known = cache.get(CACHE_KEY, {})
            known.update({f: round(s, 1) for f, s in self.seconds.items()})
            cache.set(CACHE_KEY, known)
