"""The checkpoint (two slots written in turn, the newest valid one wins) and the abort file,
over FaultyFileIO: what a reopen and a power loss leave."""

from __future__ import annotations

import zlib

import pytest

from tidemq.store.checkpoint import CP_MAGIC, CP_VERSION, CRC, SLOT, SLOT_BYTES, AbortFile, Checkpoint, CheckpointState
from tidemq.testing.faulty_io import FaultyFileIO

from ..support.store import NothingUnsyncedSurvives

PATH = "/r/checkpoint"


@pytest.fixture
def fio() -> FaultyFileIO:
    f = FaultyFileIO()
    f.makedirs("/r")
    return f


def reopen(fio: FaultyFileIO) -> Checkpoint:
    cp = Checkpoint(fio, PATH)
    cp.open()
    return cp


def test_a_new_checkpoint_is_empty_and_not_valid(fio):
    cp = Checkpoint(fio, PATH)
    assert cp.open() == CheckpointState() and not cp.valid


def test_the_last_flush_is_what_a_reopen_reads(fio):
    cp = reopen(fio)
    cp.update(physic_offset=111, logics_offset=100, index_offset=90,
              physic_timestamp_ms=5, logics_timestamp_ms=4, index_timestamp_ms=3)
    cp.flush()
    cp.update(physic_offset=222)
    cp.flush()
    cp.update(physic_offset=333)                   # updated, never flushed
    cp.close()
    cp2 = reopen(fio)
    assert cp2.valid and cp2.state == CheckpointState(5, 4, 3, 222, 100, 90)
    assert cp2.state.dispatch_safe_offset == 90 and cp2.state.min_timestamp_ms == 4
    cp2.update(physic_offset=444)                  # the sequence goes on from the newest slot
    cp2.flush()
    assert reopen(fio).state.physic_offset == 444


def test_flushes_alternate_between_the_two_slots(fio):
    cp = reopen(fio)
    seqs = []
    for off in (10, 20, 30):
        cp.update(physic_offset=off)
        cp.flush()
        raw = fio.pread(fio.open(PATH), 2 * SLOT_BYTES, 0)
        seqs.append([SLOT.unpack_from(raw, i * SLOT_BYTES)[2] for i in range(2)])
    assert seqs == [[0, 1], [2, 1], [2, 3]]


def test_a_torn_newest_slot_falls_back_to_the_older_one(fio):
    cp = reopen(fio)
    cp.update(physic_offset=111, logics_offset=100, index_offset=90)
    cp.flush()
    cp.update(physic_offset=222, logics_offset=200, index_offset=190)
    cp.flush()
    h = fio.open(PATH)
    fio.pwrite(h, b"\xff" * 20, (cp._seq % 2) * SLOT_BYTES + 10)     # the newest slot: torn
    cp2 = reopen(fio)
    assert cp2.valid and cp2.state.physic_offset == 111 and cp2.state.dispatch_safe_offset == 90


@pytest.mark.parametrize("magic, version", [(CP_MAGIC + 1, CP_VERSION), (CP_MAGIC, CP_VERSION + 1)])
def test_a_slot_of_another_format_is_not_read(fio, magic, version):
    body = SLOT.pack(magic, version, 7, 0, 0, 0, 999, 999, 999)
    h = fio.open(PATH, create=True)
    fio.pwrite(h, body + CRC.pack(zlib.crc32(body)), 0)
    cp = reopen(fio)
    assert not cp.valid and cp.state.physic_offset == 0


def test_a_flushed_checkpoint_survives_a_power_loss(fio):
    cp = reopen(fio)
    cp.update(physic_offset=123, logics_offset=120, index_offset=110)
    cp.flush()
    cp.update(physic_offset=456)                   # not flushed: may be lost, never half there
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    cp2 = reopen(fio)
    assert cp2.valid and (cp2.state.physic_offset, cp2.state.logics_offset) == (123, 120)


def test_the_abort_file_is_created_and_removed_durably(fio):
    a = AbortFile(fio, "/r/abort", "/r")
    assert not a.exists()
    a.create()
    assert a.exists()
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    a = AbortFile(fio, "/r/abort", "/r")
    assert a.exists(), "created: still there after a power loss"
    a.remove()
    a.remove()                                     # removing it twice is fine
    fio = fio.after_power_loss(NothingUnsyncedSurvives())
    assert not AbortFile(fio, "/r/abort", "/r").exists(), "removed: still gone after a power loss"
