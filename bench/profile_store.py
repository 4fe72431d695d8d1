"""Where the time goes in put_batch and get: pyinstrument trees, a per-function
table (self time per message), and micro-timings of the pieces in isolation.

    .venv/bin/python bench/profile_store.py                       # pyinstrument: put_batch(1024) and get(32)
    .venv/bin/python bench/profile_store.py --what put_batch --batch 128
    .venv/bin/python bench/profile_store.py --micro               # ns per message of the pieces, no profiler
    .venv/bin/py-spy record -r 1000 --native -f raw -o bench/.tmp/pyspy_put_batch.txt -- \\
        .venv/bin/python bench/profile_store.py --driver put_batch --count 600000   # no profiler inside
    .venv/bin/python bench/profile_store.py --pyspy-summary bench/.tmp/pyspy_put_batch.txt

Writes bench/results/profile_<what>.txt (pyinstrument's tree), profile_<what>.md
(functions by self time: % of the profiled time and microseconds per message),
profile_micro.{json,md}, and pyspy_<what>.md from a py-spy raw file. Same workload as store_append / store_read: 1 KiB
bodies, topic "Bench" with 8 queues, ASYNC_FLUSH, 1 GiB segments, index off.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import mmap
import os
import time
import zlib

from _report import RESULTS_DIR, machine, progress, scratch_dir
from _store import QUEUES, TOPIC, fill, get_all, make_bodies, message_pool, store_config

from tidemq.config import MIB
from tidemq.store import Message, MessageStore, PutResult, PutStatus
from tidemq.record import codec
from tidemq.store.consume_queue import UNIT

SEG = 1024 * MIB


def make_store(root: str) -> MessageStore:
    s = MessageStore(store_config(root, SEG, pull_in_memory_count_max=256, pull_in_memory_bytes_max=1 * MIB)).start()
    s.create_topic(TOPIC, QUEUES)
    assert s.put(Message(topic=TOPIC, body=b"x" * 1024, queue_id=0)).ok
    return s


def put_workload(store: MessageStore, count: int, batch: int) -> int:
    pool = message_pool(make_bodies(), False)
    chunks = [pool[j:j + batch] for j in range(0, len(pool), batch)]
    done = 0
    while done < count:
        for c in chunks:
            store.put_batch(c)
        done += len(pool)
    return done


# pyinstrument ------------------------------------------------------------------------
def function_table(root, n_msgs: int, top: int = 25) -> tuple[list[dict], float]:
    """Aggregate the frame tree by function: self and inclusive time."""
    self_t: dict[str, float] = collections.Counter()
    incl_t: dict[str, float] = collections.Counter()

    def key(f) -> str:
        return f"{f.function} ({f.file_path_short}:{f.line_no})"

    def walk(f, stack: set) -> None:
        if f.is_synthetic:
            return
        k = key(f)
        self_t[k] += f.total_self_time
        if k not in stack:
            incl_t[k] += f.time
        stack = stack | {k}
        for c in f.children:
            walk(c, stack)

    walk(root, set())
    total = root.time
    rows = []
    for k, s in sorted(self_t.items(), key=lambda kv: -kv[1])[:top]:
        rows.append({"function": k, "self_pct": 100 * s / total, "self_us_per_msg": s / n_msgs * 1e6,
                     "incl_pct": 100 * incl_t[k] / total, "incl_us_per_msg": incl_t[k] / n_msgs * 1e6})
    return rows, total


def profile(what: str, count: int, batch: int, max_count: int, interval: float) -> None:
    from pyinstrument import Profiler

    with scratch_dir(f"profile_{what}") as tmp:
        store = make_store(os.path.join(tmp, "store"))
        try:
            if what == "get":
                fill(store, make_bodies(), count)
                get_all(store, max_count, 1 * MIB, 30.0)                     # warm-up
            else:
                put_workload(store, 20_000, batch)                             # warm-up
            p = Profiler(interval=interval)
            t0 = time.perf_counter()
            p.start()
            if what == "get":
                n, _nb, calls = get_all(store, max_count, 1 * MIB, 60.0)
            else:
                n = put_workload(store, count, batch)
                calls = n // batch
            p.stop()
            wall = time.perf_counter() - t0
        finally:
            store.shutdown()
    label = f"put_batch({batch})" if what == "put_batch" else f"get(max_count={max_count})"
    name = f"profile_{what}" + (f"_{batch}" if what == "put_batch" and batch != 1024 else "") + \
           (f"_{max_count}" if what == "get" and max_count != 32 else "")
    os.makedirs(RESULTS_DIR, exist_ok=True)
    text = p.output_text(unicode=False, color=False, show_all=True)
    with open(os.path.join(RESULTS_DIR, name + ".txt"), "w") as fh:
        fh.write(text)
    rows, total = function_table(p.last_session.root_frame(), n)
    m = machine()
    md = [f"# {name}: {label}", "",
          f"{m['date']} · nproc {m['nproc']} · Python {m['python']} · pyinstrument interval {interval * 1e3:g} ms",
          "", f"{n:,} messages in {calls:,} calls; {wall:.2f} s wall under the profiler "
              f"({n / wall:,.0f} msgs/s, {wall / n * 1e6:.2f} us/msg; the profiler adds overhead); "
              f"profiled time {total:.2f} s.", "",
          "Self time includes the C functions a Python function calls (struct.pack_into, zlib.crc32, "
          "os.pread, bytes copies): pyinstrument does not see below Python frames.", "",
          "| function (file:line of def) | self % | self us/msg | incl % | incl us/msg |", "|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| `{r['function']}` | {r['self_pct']:.1f} | {r['self_us_per_msg']:.3f} | "
                  f"{r['incl_pct']:.1f} | {r['incl_us_per_msg']:.3f} |")
    md.append("")
    with open(os.path.join(RESULTS_DIR, name + ".md"), "w") as fh:
        fh.write("\n".join(md))
    print("\n".join(md))
    print(f"wrote bench/results/{name}.{{txt,md}}")


# py-spy raw output -------------------------------------------------------------------
def pyspy_summary(path: str, top: int = 30) -> None:
    """Summarize a py-spy ``--format raw`` file: only the samples inside the measured workload
    (put_workload / get_all), by innermost store line, Python function (inclusive) and what C
    code runs under the innermost Python frame (with --native). Printed and written to
    bench/results/<raw file name>.md."""
    pyleaf = collections.Counter()
    incl = collections.Counter()
    native = collections.Counter()
    gc_under = collections.Counter()
    total = 0
    with open(path) as fh:
        for line in fh:
            stack, _, cnt = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            frames = stack.split(";")
            if not any("put_workload" in f or "get_all" in f for f in frames):
                continue                      # background threads, set-up
            c = int(cnt)
            total += c
            py = [f for f in frames if ".py:" in f]
            inner = next((f for f in reversed(py) if "tidemq" in f), None) or (py[-1] if py else frames[-1])
            pyleaf[inner] += c
            for fn in {f.split(" (")[0] for f in py}:
                incl[fn] += c
            if py and frames[-1] != py[-1]:
                below = frames[frames.index(py[-1]) + 1:]
                kind = _native_kind(below)
            else:
                kind = "(interpreter: Python bytecode)"
            native[kind] += c
            if kind.startswith("cyclic GC"):
                gc_under[inner] += c
    if not total:
        raise SystemExit(f"{path}: no samples inside put_workload / get_all")
    name = os.path.splitext(os.path.basename(path))[0]
    out = [f"# {name}: py-spy samples of the measured workload", "",
           f"From `{os.path.relpath(path)}`: {total:,} samples inside put_workload / get_all "
           f"(background threads and set-up left out). Percentages are of those samples.", ""]

    def table(title: str, counter: collections.Counter, n: int = top) -> None:
        out.append(f"## {title}")
        out.append("")
        out.append("| % | where |")
        out.append("|---|---|")
        for f, c in counter.most_common(n):
            out.append(f"| {100 * c / total:.1f} | `{f}` |")
        out.append("")

    table("Innermost store line (the bench loop if none)", pyleaf)
    table("Python functions, inclusive", incl)
    table("What runs under the innermost Python frame (needs --native)", native, 12)
    if gc_under:
        table("Cyclic GC, by the store line whose allocation triggered it", gc_under, 8)
    text = "\n".join(out)
    print(text)
    os.makedirs(RESULTS_DIR, exist_ok=True)
    with open(os.path.join(RESULTS_DIR, name + ".md"), "w") as fh:
        fh.write(text)
    print(f"wrote bench/results/{name}.md")


def _native_kind(below: list[str]) -> str:
    text = ";".join(below)
    for needle, kind in (("gc_collect", "cyclic GC (gc_collect_main)"), ("crc32", "zlib crc32"),
                         ("s_pack", "struct pack"), ("s_unpack", "struct unpack"), ("unpack", "struct unpack"),
                         ("pwrite", "pwrite syscall"), ("pread", "pread syscall"), ("fdatasync", "fdatasync"),
                         ("memcpy", "memcpy"), ("dealloc", "object deallocation"), ("_PyObject_Malloc", "allocation"),
                         ("PyBytes_FromStringAndSize", "bytes allocation/copy"), ("mmap", "mmap object")):
        if needle in text:
            return kind
    return "other C: " + below[-1].split(" (")[0][:60]


# Micro-timings ----------------------------------------------------------------------
def bench_ns(fn, n: int, repeat: int = 9) -> float:
    """Best of ``repeat`` runs of fn(n) (which does n operations), in ns per operation: the
    minimum is the least disturbed run (what timeit reports), the right statistic for the
    intrinsic cost of a piece on a machine other jobs share."""
    xs = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn(n)
        xs.append((time.perf_counter_ns() - t0) / n)
    return min(xs)


def micro() -> None:
    """The pieces timed alone. Only primitives and public calls, so it keeps working while the
    store's internals change; each piece is labelled with what the store does with it."""
    bodies = make_bodies()
    body = bodies[0]
    rows: list[tuple[str, str, float]] = []

    def add(path: str, piece: str, fn, n: int, repeat: int = 9) -> None:
        try:
            rows.append((path, piece, bench_ns(fn, n, repeat)))
        except (TypeError, AttributeError, ValueError) as e:       # an API that moved
            progress(f"skipped {piece!r}: {e!r}")

    with scratch_dir("profile_micro") as tmp:
        store = make_store(os.path.join(tmp, "store"))
        try:
            pool = message_pool(bodies, False)
            topic_b = TOPIC.encode()
            props = getattr(codec, "RECORD_CRC_TAIL", b"")
            s = codec.record_struct(len(body), len(topic_b), len(props))
            size = s.size
            host = codec.encode_host(store.config.store_host)

            # --- write path pieces ---
            def crc(n):
                f = zlib.crc32
                for _ in range(n):
                    f(body)
            add("put", "zlib.crc32 of the 1 KiB body (BODYCRC)", crc, 200_000)

            fd = os.open(os.path.join(tmp, "scratch"), os.O_RDWR | os.O_CREAT, 0o644)
            os.posix_fallocate(fd, 0, 64 * MIB)
            mm = mmap.mmap(fd, 64 * MIB)
            os.close(fd)
            mm[:] = bytes(64 * MIB)                            # fault the pages in: measure the pack alone
            buf = memoryview(mm)

            def pack(n):
                p = s.pack_into
                pos = 0
                for i in range(n):
                    p(buf, pos, size, codec.MAGIC, 1, 0, 0, i, pos, 0, 0, host, 0, host, 0, 0, 1024, body, 5,
                      topic_b, len(props), props)
                    pos += size
                    if pos + size > 64 * MIB:
                        pos = 0
            add("put", f"record Struct.pack_into, {size}-byte record, pages resident", pack, 50_000)

            def rstruct(n):
                f = codec.record_struct
                for _ in range(n):
                    f(1024, 5, len(props))
            add("put", "codec.record_struct (cached Struct lookup)", rstruct, 200_000)

            def seal1(n):
                crc32 = zlib.crc32
                pos = 0
                for _ in range(n):
                    end = pos + size
                    buf[end - 11:end - 1] = b"%010d" % crc32(buf[pos:pos + 88], 12345)
                    pos = end
                    if pos + size > 64 * MIB:
                        pos = 0
            add("put", "record CRC, tail CRC cached: crc32(header 88 B, tail crc) + b'%010d' + slice store", seal1,
                100_000)

            def seal2(n):
                crc32 = zlib.crc32
                pos = 0
                for _ in range(n):
                    end = pos + size
                    buf[end - 11:end - 1] = b"%010d" % crc32(buf[pos + 88 + 1024:end - 11], crc32(buf[pos:pos + 88], 7))
                    pos = end
                    if pos + size > 64 * MIB:
                        pos = 0
            add("put", "record CRC, tail not cached: two crc32 over memoryview slices + b'%010d' + slice store",
                seal2, 100_000)

            def digits(n):
                for i in range(n):
                    b"%010d" % i
            add("put", "b'%010d' % crc (the CRC as 10 ASCII digits)", digits, 200_000)

            st = PutStatus.PUT_OK
            if issubclass(PutResult, tuple):
                def presult(n):
                    new = tuple.__new__
                    for i in range(n):
                        new(PutResult, (st, i, 0, i, size, 0, None, None, host))
            else:
                def presult(n):
                    for i in range(n):
                        PutResult(st, i, 0, i, size, 0, None, None, host)
            add("put", "one PutResult, as put_batch makes it", presult, 200_000)

            def unit(n):
                p = UNIT.pack
                for i in range(n):
                    p(i, size, 0)
            add("put", "UNIT.pack (one consume-queue unit)", unit, 200_000)

            def msg(n):
                for _ in range(n):
                    Message(topic=TOPIC, body=body)
            add("put (producer)", "Message(topic, body) construction", msg, 200_000)

            def pb(n, b):
                chunks = [pool[j:j + b] for j in range(0, 1024, b)]
                done = 0
                while done < n:
                    for c in chunks:
                        store.put_batch(c)
                    done += 1024
            for b in (1024, 128):
                add("put", f"whole put_batch({b}), per message (fresh pages: page faults included)",
                    lambda n, b=b: pb(n, b), 51_200, repeat=5)
                gc.collect()
            gc.disable()
            try:
                add("put", "whole put_batch(1024), per message, cyclic GC off", lambda n: pb(n, 1024), 51_200,
                    repeat=5)
            finally:
                gc.enable()

            # --- read path pieces (over what was just written) ---
            mf = next(m for m in store.segments.segments if m.wrote_pos)
            mbuf = mf.buf
            offs = []
            pos = 0
            while pos < mf.wrote_pos and len(offs) < 100_000:
                offs.append(pos)
                pos += codec.I32.unpack_from(mbuf, pos)[0]
            no = len(offs)

            def dec(n):
                d = codec.decode_record
                for i in range(n):
                    d(mbuf, offs[i % no])
            add("get", "codec.decode_record(buf, pos): what get does per message", dec, 100_000)

            def hdr(n):
                u = codec.HEADER.unpack_from
                for i in range(n):
                    u(mbuf, offs[i % no])
            add("get", "HEADER.unpack_from (88 bytes, 15 fields) alone", hdr, 100_000)

            def bodycopy(n):
                for i in range(n):
                    p = offs[i % no] + 88
                    bytes(mbuf[p:p + 1024])
            add("get", "bytes(memoryview slice): a 1 KiB body copied out", bodycopy, 100_000)

            def reccopy(n):
                for i in range(n):
                    p = offs[i % no]
                    bytes(mbuf[p:p + size])
            add("get", f"bytes(memoryview slice): the whole {size}-byte record copied out", reccopy, 100_000)

            def topicstr(n):
                for i in range(n):
                    p = offs[i % no] + 88 + 1024 + 1
                    str(mbuf[p:p + 5], "ascii")
            add("get", "str(topic slice, 'ascii')", topicstr, 100_000)

            cq = store.queues.get(TOPIC, 0)

            def cqread(n):
                for i in range(n):
                    cq.read((i * 32) % max(cq.max_offset - 32, 1), 32)
            add("get (per call)", "ConsumeQueue.read(offset, 32): 32 units by pread", cqread, 20_000)

            def holdrel(n):
                for _ in range(n):
                    mf.hold()
                    mf.release()
            add("get (per call)", "MappedFile.hold() + release()", holdrel, 100_000)

            def it(n):
                raw = cq.read(0, 32)
                for _ in range(n // 32):
                    for _u in UNIT.iter_unpack(raw):
                        pass
            add("get", "UNIT.iter_unpack, per unit", it, 320_000)

            def getn(n, mc):
                g = store.get
                done = 0
                off = 0
                mx = cq.max_offset
                while done < n:
                    r = g("G", TOPIC, 0, off, max_count=mc, max_bytes=1 * MIB)
                    done += len(r.messages)
                    off = r.next_offset if r.next_offset < mx else 0
            for mc in (32, 256):
                add("get", f"whole get(max_count={mc}), per message", lambda n, mc=mc: getn(n, mc), 64_000, repeat=5)
            buf.release()
            mm.close()
        finally:
            store.shutdown()
    os.makedirs(RESULTS_DIR, exist_ok=True)
    m = machine()
    md = ["# profile_micro: the pieces of put_batch and get, timed alone", "",
          f"{m['date']} · nproc {m['nproc']} · Python {m['python']} · best of 9 loops (5 for whole calls) · "
          f"load {m.get('loadavg_1m')} · src {m['src'].get('head')} (tree {m['src'].get('tree_sha1')})", "",
          "Each piece timed alone in a loop (loop overhead included, ~20-40 ns). Whole put_batch here "
          "appends into one long-lived store (fresh pages: page faults included).", "",
          "| path | piece | ns per message (or per call) |", "|---|---|---|"]
    md += [f"| {p} | {k} | {v:,.0f} |" for p, k, v in rows]
    md.append("")
    with open(os.path.join(RESULTS_DIR, "profile_micro.md"), "w") as fh:
        fh.write("\n".join(md))
    with open(os.path.join(RESULTS_DIR, "profile_micro.json"), "w") as fh:
        json.dump({"machine": m, "rows": [{"path": p, "piece": k, "ns": round(v, 1)} for p, k, v in rows]},
                  fh, indent=2)
        fh.write("\n")
    print("\n".join(md))


def driver(what: str, count: int, batch: int, max_count: int) -> None:
    """The profiled workload without a profiler inside (for py-spy)."""
    with scratch_dir(f"driver_{what}") as tmp:
        store = make_store(os.path.join(tmp, "store"))
        try:
            if what == "get":
                fill(store, make_bodies(), count)
                progress("filled; reading")
                t0 = time.perf_counter()
                for _ in range(3):
                    n, _nb, _c = get_all(store, max_count, 1 * MIB, 60.0)
            else:
                t0 = time.perf_counter()
                n = put_workload(store, count, batch)
            progress(f"{what}: {n:,} messages, {time.perf_counter() - t0:.2f}s")
        finally:
            store.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default="put_batch,get")
    ap.add_argument("--count", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--max-count", type=int, default=32)
    ap.add_argument("--interval", type=float, default=0.0002, help="pyinstrument sampling interval (s)")
    ap.add_argument("--micro", action="store_true")
    ap.add_argument("--driver", choices=("put_batch", "get"))
    ap.add_argument("--pyspy-summary", metavar="RAW_FILE")
    a = ap.parse_args()
    if a.pyspy_summary:
        pyspy_summary(a.pyspy_summary)
    elif a.driver:
        driver(a.driver, a.count, a.batch, a.max_count)
    elif a.micro:
        micro()
    else:
        for w in a.what.split(","):
            profile(w, a.count, a.batch, a.max_count, a.interval)


if __name__ == "__main__":
    main()
