"""A member dies with its parent: the parent killed with kill -9 takes the member with it (the kernel's
SIGTERM, PR_SET_PDEATHSIG), and a member whose parent is gone already does not start."""

import os
import signal
import subprocess
import sys

from ...support.wait import wait_until
from .test_supervisor_e2e import alive

MEMBER = ("import os, sys, time\n"
          "from tidemq.broker.multi.member import die_with_parent\n"
          "die_with_parent(os.getppid())\n"
          "print(os.getpid(), flush=True)\n"
          "time.sleep(600)\n")
PARENT = ("import subprocess, sys, time\n"
          f"c = subprocess.Popen([sys.executable, '-c', {MEMBER!r}], stdout=sys.stdout)\n"
          "time.sleep(600)\n")


def test_a_member_dies_with_its_killed_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    member = 0
    try:
        member = int(parent.stdout.readline())         # armed: it said its pid after die_with_parent
        assert alive(member)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        wait_until(lambda: not alive(member), "the member to go with its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if member and alive(member):                    # the test failed: nothing left behind
            os.kill(member, signal.SIGKILL)


def test_a_member_whose_parent_is_gone_does_not_start():
    code = ("import os\n"
            "from tidemq.broker.multi.member import die_with_parent\n"
            "die_with_parent(os.getppid() + 1)\n"       # not its parent: as if the parent went before
            "print('started')\n")
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "started" not in r.stdout
