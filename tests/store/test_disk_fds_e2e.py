"""A real broker out of file descriptors (its open-file limit lowered to what it holds, connections
piled on until it can accept no more): the disk check meets EMFILE on the commit log's marker and
says so, the directory is not taken offline, and once the descriptors are back, writes resume
without a restart (before, one check at the limit took the commit log offline for good)."""

import os
import resource
import socket
import subprocess
import sys

from tidemq.client import Producer, admin

from ..support.brokers import CLIENT_HOME, REPO, SMALL, free_port
from ..support.wait import wait_until


def test_out_of_descriptors_then_back_writes_resume(tmp_path):
    root, log_path = str(tmp_path / "store"), str(tmp_path / "broker.log")
    port = free_port()
    env = {**os.environ, **SMALL, "PYTHONUNBUFFERED": "1", "TIDEMQ_METRICS_PORT": "0", "HOME": CLIENT_HOME,
           "TIDEMQ_AUTO_CREATE_TOPICS": "true"}
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tidemq.cli.main", "serve", "--root", root, "--port", str(port)],
                                stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=REPO)
    held = []
    try:
        assert "ready on" in proc.stdout.readline()
        endpoint = f"127.0.0.1:{port}"
        with Producer(endpoint, timeout_s=60) as p:
            assert p.send_batch("T", [b"before"]).all_ok()
        limit = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)
        in_use = len(os.listdir(f"/proc/{proc.pid}/fd"))
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (in_use + 4, limit[1]))
        try:
            for _ in range(40):                     # accepted until the broker has no descriptor left
                held.append(socket.create_connection(("127.0.0.1", port), timeout=60))
            wait_until(lambda: "Too many open files" in open(log_path).read() and "not the disk" in
                       open(log_path).read() or None, "a disk check met EMFILE and said so")
        finally:
            for s in held:
                s.close()
            held = []
            resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, limit)
        with Producer(endpoint, timeout_s=60) as p:
            r = wait_until(lambda: (lambda r: r if r.all_ok() else None)(p.send_batch("T", [b"after"])),
                           "writes resume")
        assert r.all_ok()
        dirs = admin.call(endpoint, "DiskStatus", timeout_s=60)["status"]["directories"]
        cl = [d for d in dirs if d["role"] == "commitlog"]
        assert cl and all(d["state"] == "writable" for d in cl), cl
        assert "is offline" not in open(log_path).read()
    finally:
        for s in held:
            s.close()
        proc.terminate()
        proc.wait(timeout=60)
