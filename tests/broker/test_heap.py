"""broker/heap.py: with the big-buffer thresholds taken, 16 MiB buffers made and freed again and
again, two at a time (a pull answer and gRPC's copy of it), come back from the heap: their pages
do not fault in anew (with glibc's defaults every round faults ~8,000 pages in: the two freed
buffers exceed its trim threshold and go back to the system). Run in a child process: mallopt is
process-wide."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tidemq.broker.heap import keep_big_buffers

CHILD = r"""
import resource, sys
from tidemq.broker.heap import keep_big_buffers
took = keep_big_buffers(128 << 20)
faults = []
for _ in range(12):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = bytearray(16 << 20)          # an answer, every page written
    b = bytearray(16 << 20)          # gRPC's copy of it
    del a, b                         # both freed: 32 MiB at the heap's top, which glibc gives back
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(took, max(faults[2:]))
"""


def test_nothing_changes_at_zero():
    assert keep_big_buffers(0) is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_big_buffers_come_back_from_the_heap():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=True)
    took, faults = out.stdout.split()
    if took != "True":
        pytest.skip("not glibc: mallopt is not there")
    assert int(faults) < 64, out.stdout           # 8,192 pages of 4 KiB a round if they were mapped afresh
