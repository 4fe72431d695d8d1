"""Replication frames: what is encoded decodes back; anything damaged or foreign is a FrameError."""

import pytest

from tidemq.protocol import replication as rp
from tidemq.protocol.data import FrameError


def test_round_trip():
    raw = rp.encode(rp.DATA, epoch=3, offset=4096, end=9000, payload=b"records")
    assert rp.decode(raw) == rp.Frame(rp.DATA, 3, 4096, 9000, b"records")
    h = rp.decode(rp.hello("g", "m1", "127.0.0.1:1", 2, 77, leader_endpoint="127.0.0.1:2"))
    assert h.kind == rp.HELLO and h.offset == 77 and h.json()["member"] == "m1"


@pytest.mark.parametrize("damage", [
    lambda r: r[:10],                                   # shorter than a header
    lambda r: b"\x00" + r[1:],                          # magic
    lambda r: r[:4] + b"\x63" + r[5:],                  # unknown kind
    lambda r: r[:-1] + bytes([r[-1] ^ 1]),              # payload bit flip: CRC
    lambda r: r + b"x",                                 # longer than it says
])
def test_damage_is_refused(damage):
    raw = rp.encode(rp.DATA, 1, 0, 10, b"payload!")
    with pytest.raises(FrameError):
        rp.decode(damage(raw))


def test_a_hello_that_is_not_json():
    with pytest.raises(FrameError):
        rp.decode(rp.encode(rp.HELLO, payload=b"[1, 2")).json()
