"""Shared helpers for the store benchmarks: machine facts, repeated-run summaries,
ratios against a reference measured in the same run, the JSON + markdown report,
a scratch directory on the real disk, and a frozen copy of src/ to measure.

A report (``bench/results/<name>.json`` and ``.md``) holds: the benchmark's name,
its parameters, for every variant the samples of its repeated runs with median
and p90, every ratio against the reference with its goal, the machine (nproc,
python version, CPU, RAM, the file system the data went to, load), the date and
the code measured (git HEAD, uncommitted changes, tree hash, snapshot).

Ratios are paired: the reference is measured right next to each variant's sample
(``add(variant, x, ref=r)``; otherwise round by round), each pair gives one
ratio, and the reported ratio is the median of those (its p10 and the ratio of
the medians are kept too). A noisy machine moves both sides of a pair together,
so the paired ratio is steadier than either throughput.

    python bench/_report.py snapshot [--worktree | --rev COMMIT]   # freeze src/ -> prints the TIDEMQ_BENCH_SRC to use
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterator, Sequence

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.environ.get("TIDEMQ_BENCH_RESULTS") or os.path.join(BENCH_DIR, "results")   # compare_src.py redirects
TMP_PARENT = os.path.join(BENCH_DIR, ".tmp")

CHECKOUT_SRC = os.path.join(os.path.dirname(BENCH_DIR), "src")
# TIDEMQ_BENCH_SRC: measure a frozen copy of src/ (``python bench/_report.py snapshot``) instead of
# the live checkout, so that edits landing in src/ during a run cannot mix two versions of the code.
BENCH_SRC = os.environ.get("TIDEMQ_BENCH_SRC") or CHECKOUT_SRC
if BENCH_SRC not in sys.path[:1]:
    sys.path.insert(0, BENCH_SRC)


# Machine ---------------------------------------------------------------------------
def nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def fs_type(path: str) -> tuple[str, str]:
    """(mount point, file system type) that ``path`` lives on, from /proc/mounts."""
    path = os.path.realpath(path)
    best, fstype = "/", "unknown"
    try:
        with open("/proc/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mnt = parts[1].replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                    best, fstype = mnt, parts[2]
    except OSError:
        pass
    return best, fstype


def machine(data_dir: str | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {
        "nproc": nproc(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "mem_total_gib": round(_mem_total() / (1 << 30), 1),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        m["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    m["src"] = src_revision()
    m["record_loops"] = record_loops()
    if data_dir is not None:
        mnt, fst = fs_type(data_dir)
        m["data_fs"] = {"mount": mnt, "type": fst}
    return m


def record_loops() -> str:
    """What the measured code's per-record loops are (tidemq.accel.describe(), asked of BENCH_SRC
    in a child process): a compiled module that does not load falls back to the Python twins with
    one log line, and a run that way would look like a slow build."""
    try:
        r = subprocess.run([sys.executable, "-c", "import tidemq.accel as a; print(a.describe())"],
                           env=dict(os.environ, PYTHONPATH=BENCH_SRC), capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else "unknown"


def tree_sha1(src: str) -> str:
    """Hash of every source file under src/tidemq (.py, and the compiled parts' .c / .h and the JVM
    reader's .java; path + content): the identity of the code measured."""
    h = hashlib.sha1()
    base = os.path.join(src, "tidemq")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith((".py", ".c", ".h", ".java")):
                p = os.path.join(dirpath, f)
                h.update(os.path.relpath(p, base).encode())
                with open(p, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()[:12]


def src_revision() -> dict[str, Any]:
    """The code measured: git HEAD, whether src/ differs from it (with a hash of the diff), and the
    hash of the tree itself; for a snapshot (TIDEMQ_BENCH_SRC), what was recorded when it was taken."""
    if os.path.abspath(BENCH_SRC) != os.path.abspath(CHECKOUT_SRC):
        info: dict[str, Any] = {"snapshot": os.path.relpath(BENCH_SRC, os.path.dirname(BENCH_DIR))}
        try:
            with open(os.path.join(BENCH_SRC, "REVISION.json")) as fh:
                info.update(json.load(fh))
        except OSError:
            pass
        info["tree_sha1"] = tree_sha1(BENCH_SRC)
        return info
    root = os.path.dirname(BENCH_DIR)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=30).stdout

    try:
        head = git("rev-parse", "--short", "HEAD").strip()
        dirty = [ln[3:] for ln in git("status", "--porcelain", "--", "src").splitlines()]
        diff = git("diff", "HEAD", "--", "src")
    except (OSError, subprocess.SubprocessError):
        return {"head": "unknown"}
    out: dict[str, Any] = {"head": head, "src_dirty": bool(dirty)}
    if dirty:
        out["src_changed_files"] = dirty
        out["src_diff_sha1"] = hashlib.sha1(diff.encode()).hexdigest()[:12]
    out["tree_sha1"] = tree_sha1(CHECKOUT_SRC)
    return out


def _build_accel(tmp: str) -> bool:
    """Build the snapshot's compiled part (tidemq/accel_c/*.c, or tidemq/_accel.c before it was split,
    as setup.py does) next to its sources:
    the code measured is what `pip install` makes of that revision. False when it has none or it
    cannot be built (then the snapshot runs the Python twins, as an install would)."""
    parts = os.path.join(tmp, "tidemq", "accel_c")
    if os.path.isdir(parts):
        sources = sorted(os.path.join(parts, f) for f in os.listdir(parts) if f.endswith(".c"))
    else:
        sources = [os.path.join(tmp, "tidemq", "_accel.c")]
    if not all(os.path.exists(s) for s in sources):
        return False
    try:
        from setuptools import Distribution, Extension
        dist = Distribution({"ext_modules": [Extension("tidemq._accel", sources, extra_compile_args=["-O2", "-std=c11"])]})
        cmd = dist.get_command_obj("build_ext")
        cmd.build_lib = tmp
        cmd.build_temp = os.path.join(tmp, ".build")
        cmd.ensure_finalized()
        cmd.run()
        shutil.rmtree(cmd.build_temp, ignore_errors=True)
        return True
    except Exception as e:  # noqa: BLE001 - a snapshot without it still measures the Python twins
        progress(f"snapshot: tidemq._accel not built ({e}): the Python twins will run")
        return False


def snapshot(worktree: bool = False, rev: str = "HEAD") -> str:
    """Freeze the code to measure: by default src/tidemq as committed at ``rev`` (HEAD; ``git
    archive``: reproducible by checking the commit out), with ``worktree`` the working tree as it
    is now. Goes to bench/.tmp/src-<tree hash>/ with a REVISION.json; returns the directory."""
    root = os.path.dirname(BENCH_DIR)
    os.makedirs(TMP_PARENT, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="src-", suffix=".part", dir=TMP_PARENT)
    if worktree:
        info = src_revision()
        shutil.copytree(os.path.join(CHECKOUT_SRC, "tidemq"), os.path.join(tmp, "tidemq"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        if tree_sha1(tmp) != info["tree_sha1"]:
            shutil.rmtree(tmp)
            raise SystemExit("src/ changed while it was being copied: try again")
    else:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", rev], capture_output=True,
                              text=True, check=True).stdout.strip()
        archive = subprocess.run(["git", "-C", root, "archive", head, "src/tidemq"], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp, "--strip-components=1"], input=archive, check=True)
        info = {"head": head, "src_dirty": False, "from": f"git archive {rev}"}
    info["tree_sha1"] = tree_sha1(tmp)
    if not worktree:
        info["accel"] = _build_accel(tmp)
    info["taken"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    with open(os.path.join(tmp, "REVISION.json"), "w") as fh:
        json.dump(info, fh, indent=2)
    d = os.path.join(TMP_PARENT, f"src-{info['tree_sha1']}")
    if os.path.isdir(d):
        shutil.rmtree(tmp)
    else:
        os.rename(tmp, d)
    return d


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


# Scratch directory -----------------------------------------------------------------
@contextlib.contextmanager
def scratch_dir(name: str, keep: bool = False) -> Iterator[str]:
    """A fresh directory under bench/.tmp (inside the checkout: the real disk, never a
    tmpfs /tmp), removed afterwards. Refuses to run on tmpfs / ramfs."""
    os.makedirs(TMP_PARENT, exist_ok=True)
    d = tempfile.mkdtemp(prefix=f"{name}-", dir=TMP_PARENT)
    mnt, fst = fs_type(d)
    if fst in ("tmpfs", "ramfs"):
        shutil.rmtree(d, ignore_errors=True)
        raise SystemExit(f"{d} is on {fst} ({mnt}): benchmarks need the real disk")
    try:
        yield d
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rmdir(TMP_PARENT)        # only if empty


def clear_dir(d: str) -> None:
    """Empty ``d`` (between rounds) without removing it."""
    for n in os.listdir(d):
        p = os.path.join(d, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


# Statistics ------------------------------------------------------------------------
def percentile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    s = sorted(xs)
    if not s:
        return float("nan")
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(samples: Sequence[float]) -> dict[str, Any]:
    return {
        "median": statistics.median(samples) if samples else float("nan"),
        "p90": percentile(samples, 90),
        "min": min(samples) if samples else float("nan"),
        "max": max(samples) if samples else float("nan"),
        "runs": len(samples),
        "samples": [round(x, 4) for x in samples],
    }


def settle(seconds: float = 0.3) -> None:
    """Before a timed sample: write back what earlier samples left dirty and let the disk
    (and online discard of deleted files) calm down, so one sample does not pay for another."""
    os.sync()
    time.sleep(seconds)


# Report ----------------------------------------------------------------------------
class Report:
    """Collects per-round samples and writes bench/results/<name>.{json,md}.

        rep = Report("store_append", params={...}, unit="msgs/s", reference="floor")
        rep.add("floor", 1.1e6); rep.add("put_batch(1024)", 8e5)   # once per round
        rep.ratio("put_batch(1024)", goal=0.7)
        rep.write(data_dir)
    """

    def __init__(self, name: str, params: dict[str, Any], unit: str, reference: str,
                 reference_doc: str = "") -> None:
        self.name = name
        self.params = params
        self.unit = unit
        self.reference = reference
        self.reference_doc = reference_doc
        self.samples: dict[str, list[float]] = {}
        self.paired_ref: dict[str, list[float]] = {}           # variant -> the reference measured next to each sample
        self.extra: dict[str, dict[str, list[float]]] = {}     # variant -> metric -> samples
        self.goals: dict[str, float] = {}
        self.goal_on: dict[str, str] = {}                     # variant -> "median" or "p10"
        self.notes: list[str] = []
        self.src_at_start = src_revision()

    def add(self, variant: str, value: float, ref: float | None = None, **extra: float) -> None:
        """One sample. ``ref``: the reference measured right next to it (the pair gives one ratio);
        without it the variant is paired with the reference's samples round by round."""
        self.samples.setdefault(variant, []).append(value)
        if ref is not None:
            self.paired_ref.setdefault(variant, []).append(ref)
        for k, v in extra.items():
            self.extra.setdefault(variant, {}).setdefault(k, []).append(v)

    def ratio(self, variant: str, goal: float | None, on: str = "median") -> None:
        """The variant's goal, judged on the median of the rounds' ratios or (``on="p10"``: the goal
        with margin) on their 10th percentile."""
        self.goals[variant] = goal if goal is not None else float("nan")
        self.goal_on[variant] = on

    def note(self, text: str) -> None:
        self.notes.append(text)

    def _ratios(self, variant: str) -> dict[str, Any]:
        ref = self.paired_ref.get(variant) or self.samples.get(self.reference, [])
        xs = self.samples.get(variant, [])
        paired = [x / r for x, r in zip(xs, ref) if r]
        med_ref = statistics.median(ref) if ref else float("nan")
        med_x = statistics.median(xs) if xs else float("nan")
        goal = self.goals.get(variant)
        ratio = statistics.median(paired) if paired else float("nan")
        p10 = percentile(paired, 10) if paired else float("nan")
        judged = p10 if self.goal_on.get(variant) == "p10" else ratio
        return {
            "ratio": ratio,                               # median of per-round ratios
            "ratio_p10": p10,
            "ratio_of_medians": med_x / med_ref if med_ref else float("nan"),
            "round_ratios": [round(p, 4) for p in paired],
            "goal": goal,
            "goal_on": self.goal_on.get(variant, "median"),
            "meets_goal": (judged >= goal) if goal is not None and goal == goal else None,
        }

    def to_dict(self, data_dir: str | None) -> dict[str, Any]:
        m = machine(data_dir)
        if m.get("src") != self.src_at_start:
            self.notes.append(f"WARNING: src/ changed during the run (start: {self.src_at_start}, end: {m.get('src')}): "
                              f"samples may mix two versions of the code; run again.")
        variants = []
        for v, xs in self.samples.items():
            row: dict[str, Any] = {"variant": v, "unit": self.unit, **summarize(xs)}
            for k, ys in self.extra.get(v, {}).items():
                row[k] = summarize(ys)
            if v != self.reference:
                row.update(self._ratios(v))
            variants.append(row)
        return {
            "name": self.name,
            "reference": self.reference,
            "reference_doc": self.reference_doc,
            "unit": self.unit,
            "params": self.params,
            "variants": variants,
            "notes": self.notes,
            "machine": m,
        }

    def markdown(self, d: dict[str, Any]) -> str:
        m = d["machine"]
        lines = [f"# {d['name']}", ""]
        src = m.get("src", {})
        where = f" · src snapshot {src['snapshot']}" if src.get("snapshot") else ""
        lines.append(f"{m['date']} · nproc {m['nproc']} · Python {m['python']} · {m['cpu']} · "
                     f"{m['mem_total_gib']} GiB RAM" +
                     (f" · data on {m['data_fs']['type']} ({m['data_fs']['mount']})" if "data_fs" in m else "") +
                     f" · load {m.get('loadavg_1m', '?')} (1 min, at the end)" +
                     f" · src at {src.get('head', '?')}" +
                     (f" + uncommitted changes (diff {src.get('src_diff_sha1')})" if src.get("src_dirty") else "") +
                     f" (tree {src.get('tree_sha1', '?')}){where}" +
                     (f" · record loops: {m['record_loops']}" if "record_loops" in m else ""))
        lines.append("")
        lines.append(f"Reference: **{d['reference']}**: {d['reference_doc']}")
        lines.append("")
        extra_keys: list[str] = []
        for row in d["variants"]:
            for k, v in row.items():
                if isinstance(v, dict) and "median" in v and k not in extra_keys:
                    extra_keys.append(k)
        hdr = ["variant", f"median {d['unit']}", f"p90 {d['unit']}", "runs", "ratio (median of rounds)",
               "ratio p10", "ratio of medians", "goal", "meets"] + [f"{k} (median)" for k in extra_keys]
        lines.append("| " + " | ".join(hdr) + " |")
        lines.append("|" + "---|" * len(hdr))
        for row in d["variants"]:
            is_ref = row["variant"] == d["reference"]
            cells = [f"`{row['variant']}`" + (" (reference)" if is_ref else ""),
                     _fmt(row["median"]), _fmt(row["p90"]), str(row["runs"])]
            if is_ref:
                cells += ["1.00", "", "", "", ""]
            else:
                goal = row.get("goal")
                cells += [f"{row['ratio']:.3f}", f"{row['ratio_p10']:.3f}", f"{row['ratio_of_medians']:.3f}",
                          (f">= {goal:g}" + (" (p10)" if row.get("goal_on") == "p10" else ""))
                          if goal is not None and goal == goal else "",
                          {True: "yes", False: "**no**", None: ""}[row["meets_goal"]]]
            for k in extra_keys:
                cells.append(_fmt(row[k]["median"]) if k in row else "")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("Parameters: " + ", ".join(f"`{k}={v}`" for k, v in d["params"].items()))
        if d["notes"]:
            lines.append("")
            lines += [f"- {n}" for n in d["notes"]]
        lines.append("")
        return "\n".join(lines)

    def write(self, data_dir: str | None = None) -> dict[str, Any]:
        os.makedirs(RESULTS_DIR, exist_ok=True)
        d = self.to_dict(data_dir)
        with open(os.path.join(RESULTS_DIR, f"{self.name}.json"), "w") as fh:
            json.dump(_clean(d), fh, indent=2, default=_json_default)
            fh.write("\n")
        md = self.markdown(d)
        with open(os.path.join(RESULTS_DIR, f"{self.name}.md"), "w") as fh:
            fh.write(md)
        print(md)
        print(f"wrote {os.path.relpath(os.path.join(RESULTS_DIR, self.name))}.{{json,md}}")
        return d


def _fmt(x: float) -> str:
    if x != x:
        return "n/a"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.4g}"


def _clean(o: Any) -> Any:
    """NaN -> null (JSON has no NaN); rounds floats to something readable."""
    if isinstance(o, float):
        return None if o != o else round(o, 6)
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def _json_default(o: Any) -> Any:
    return str(o)


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["snapshot"] and (args[1:] in ([], ["--worktree"]) or (len(args) == 3 and args[1] == "--rev")):
        d = snapshot(worktree=args[1:] == ["--worktree"], rev=args[2] if len(args) == 3 else "HEAD")
        print(d)
        print(f"export TIDEMQ_BENCH_SRC={d}", file=sys.stderr)
    else:
        raise SystemExit("usage: python bench/_report.py snapshot [--worktree | --rev COMMIT]   "
                         "(freeze src/ at HEAD, as it is now, or at a commit, for a benchmark run)")
