"""The record format, shared by everything that writes or reads records: the store, the
client, the broker's frames and the Spark decoder. Bytes in, values out; no I/O, no store.

* ``codec``: the commit-log record (RocketMQ's v1 layout plus tidemq's record CRC property),
  encode and decode, properties, tags hash, message ids;
* ``crc``: the CRC-32 every record check uses (ISA-L's when installed, else zlib's);
* ``integrity``: which records of a batch fail their CRCs (every read path asks before serving);
* ``framing``: a raw read's records copied back to back with their sizes, behind room for a
  wire header (the PullRecords frame, protocol/pull_frame.py).

A client imports this package and never ``tidemq.store``.
"""
