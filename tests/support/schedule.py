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
FILE_SECONDS: dict[str, float] = {}
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
