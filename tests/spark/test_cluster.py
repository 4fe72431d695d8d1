"""tidemq on a Spark standalone cluster (a master and one worker on 127.0.0.1, started and stopped
here), and through a Spark Connect server, whose workers' Python does not have tidemq: register()
ships the package, and without shipping the job fails with tidemq's one-line error naming the fix
(the sink's: the JVM reader's executors need only its jar). On the cluster, register() puts the
JVM reader's jar in the application (ADD JAR) where javac built it, and the executors read with
it. Through Connect: a server started without the jar reads with the Python reader, one started
with it (``--jars``) with the JVM reader.

The executors' Python is a venv of the same interpreter with no tidemq: its site-packages has a
.pth line naming this venv's site-packages (so grpcio, numpy, pyarrow, pyspark ... import), but
the editable install's own .pth there is not processed, so `import tidemq` fails."""

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import urllib.request

import pytest

from ..support.brokers import free_port, free_ports
from ..support.spark import fill_through_broker
from ..support.wait import wait_until

pytestmark = pytest.mark.timeout(1200)
HERE = os.path.dirname(os.path.abspath(__file__))
# a bound for a hang while a Spark JVM starts (master, worker, Connect server): minutes on two CPUs
# busy with other work (wait_until's two minutes were not enough at a load of 30)
JVM_START_S_MAX = 600.0


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A Python that imports tidemq's dependencies and pyspark, and not tidemq."""
    d = tmp_path_factory.mktemp("executor-venv")
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(d)], check=True, timeout=300)
    py = str(d / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "deps.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    probe = "import grpc, numpy, pyarrow, pyspark, google.protobuf, rocketmq\ntry:\n import tidemq\nexcept ImportError:\n print('no tidemq')"
    r = subprocess.run([py, "-c", probe], capture_output=True, text=True, cwd=str(d), env=_clean_env())
    assert r.stdout.strip() == "no tidemq", r.stderr
    return py


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1", **extra}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A standalone master and one worker (1 core, 1 GiB) on loopback; the master's URL."""
    import pyspark
    home = os.path.dirname(pyspark.__file__)
    d = tmp_path_factory.mktemp("cluster")
    env = _clean_env(SPARK_HOME=home, SPARK_LOG_DIR=str(d / "logs"), SPARK_WORKER_DIR=str(d / "work"),
                     SPARK_NO_DAEMONIZE="1")
    port, ui, worker_ui = free_ports(3)
    cls = os.path.join(home, "bin", "spark-class")
    procs = []
    try:
        procs.append(subprocess.Popen([cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(port), "--webui-port", str(ui)], env=env, cwd=str(d),
                                      stdout=open(d / "master.log", "w"), stderr=subprocess.STDOUT))
        master = f"spark://127.0.0.1:{port}"
        procs.append(subprocess.Popen([cls, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--webui-port", str(worker_ui), "--cores", "1", "--memory", "1g", master],
                                      env=env, cwd=str(d), stdout=open(d / "worker.log", "w"),
                                      stderr=subprocess.STDOUT))

        def alive_workers():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
                    return json.load(r).get("aliveworkers", 0)
            except (OSError, ValueError):      # not listening yet, or a page still empty (loaded machine)
                assert all(p.poll() is None for p in procs), (d / "master.log").read_text()[-2000:]
                return 0

        wait_until(alive_workers, "the worker to register with the master", JVM_START_S_MAX, 0.5)
        yield master
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_job(master, endpoint, python, *steps) -> dict:
    """cluster_job.py's ``steps`` in one driver process: {step: its JSON line}."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "cluster_job.py"), master, endpoint, *steps],
                       capture_output=True, text=True, timeout=600, cwd="/",
                       env=_clean_env(PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=sys.executable))
    done = {}
    for ln in r.stdout.splitlines():
        if ln.startswith("{"):
            got = json.loads(ln)
            done[got.pop("step")] = got
    assert list(done) == list(steps), f"the driver printed {list(done)} of {list(steps)} (rc {r.returncode}): " \
                                      f"{r.stderr[-3000:]}"
    return done


def _connect_server(d, python, *more):
    """pyspark's start-connect-server.sh (local[1], workers on ``python``) on a free loopback port,
    with ``more`` arguments; yields its sc:// URL, stops it afterwards."""
    import pyspark
    home = os.path.dirname(pyspark.__file__)
    port = free_port()
    env = _clean_env(SPARK_HOME=home, SPARK_LOG_DIR=str(d / "logs"), SPARK_PID_DIR=str(d), PYSPARK_PYTHON=python)
    log = d / "server.log"
    p = subprocess.Popen([os.path.join(home, "sbin", "start-connect-server.sh"), "--wait", "--master", "local[1]",
                          "--conf", f"spark.connect.grpc.binding.port={port}",
                          "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
                          *more],
                         env=env, cwd=str(d), stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def listening():
            assert p.poll() is None, log.read_text()[-3000:]
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        wait_until(listening, "the Spark Connect server to listen", JVM_START_S_MAX, 0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(p.pid, signal.SIGTERM)           # the script's group: the script and its java
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory, bare_python):
    """A Spark Connect server started without tidemq's jar: the Python reader."""
    yield from _connect_server(tmp_path_factory.mktemp("connect"), bare_python)


@pytest.fixture
def connect_server_with_jar(tmp_path_factory, bare_python, jvm_reader):
    """A Spark Connect server started with the JVM reader's jar (``--jars``), as the README says."""
    if not jvm_reader:
        pytest.skip("the JVM reader is not available (no javac)")
    from tidemq.spark.jar import build
    yield from _connect_server(tmp_path_factory.mktemp("connect-jar"), bare_python, "--jars", build())


def why(result: dict) -> str:
    """A failed job's error without the JVM stack frames."""
    return "\n".join(ln for ln in result.get("error", "").splitlines() if not ln.lstrip().startswith("at "))[-4000:]


def copied_rows(spark, endpoint, n, out="Out"):
    """Topic ``out`` holds topic In's rows (body, tags, keys, user properties), each once."""
    read = lambda t: spark.read.format("tidemq").option("endpoints", endpoint).option("topic", t).load()  # noqa: E731
    user = lambda r: {k: v for k, v in (r.properties or {}).items() if k in ("n", "note")}  # noqa: E731
    row = lambda r: (r.body, r.tags, r.keys, sorted(user(r).items()))                       # noqa: E731
    original = sorted(row(r) for r in read("In").collect())
    copied = sorted(row(r) for r in read(out).collect())
    assert len(original) == n and copied == original


def check_shipping(spark, broker, master, python, reader, *more_steps):
    """In one driver (cluster_job.py): the copy without shipping fails with tidemq's one-line error
    naming the fix, then, in the same session, with the package shipped it copies
    every row once, read with ``reader``; then ``more_steps``. Their results and the broker."""
    b = broker()
    n = fill_through_broker(b.endpoint, topic="In", batches=1, per=300)
    done = run_job(master, b.endpoint, python, "noship", "ship", *more_steps)
    failed = done["noship"]
    assert not failed["ok"]
    line = next(ln for ln in failed["error"].splitlines() if "MissingOnWorker: tidemq:" in ln)
    assert "cannot import 'tidemq'" in line and "register(spark)" in line and "--py-files" in line
    assert done["ship"]["ok"], why(done["ship"])
    assert done["ship"]["reader"] == reader
    copied_rows(spark, b.endpoint, n)
    return done, b, n


def test_register_ships_the_package_to_executors_without_tidemq(spark, broker, cluster, bare_python, jvm_reader):
    check_shipping(spark, broker, cluster, bare_python, "jvm" if jvm_reader else "python")


def test_through_spark_connect_a_batch_and_a_stream(spark, broker, connect_server, bare_python, tmp_path):
    """Through a Connect server without the jar (the Python reader): the batch copy as above, then,
    in the same Connect session, the copy as a checkpointed stream (availableNow) into topic Streamed."""
    done, b, n = check_shipping(spark, broker, connect_server, bare_python, "python",
                                f"stream:{tmp_path / 'checkpoint'}")
    assert done[f"stream:{tmp_path / 'checkpoint'}"]["ok"], why(done[f"stream:{tmp_path / 'checkpoint'}"])
    copied_rows(spark, b.endpoint, n, out="Streamed")


def test_through_spark_connect_with_the_jar_on_the_server(spark, broker, connect_server_with_jar, bare_python):
    check_shipping(spark, broker, connect_server_with_jar, bare_python, "jvm")
