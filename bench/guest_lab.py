"""A private lab of identical real guests for the bench's cost measurements (tests/lab/lab.py).

    with guest_lab.started(guests=4, memory_mib=512, workload="idle", prefix="plimsoll-x-") as lab:
        ...  # every guest (g00, g01, ...) booted and reporting; the lab stops on the way out

started() raises Unavailable when this machine cannot run real guests (no QEMU, no root, ...).
cpu_seconds(pid) is a lab process's CPU (libvirtd, a QEMU), which the machine's other load does
not count in.
"""
import contextlib
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lab"))
import lab as labmod  # noqa: E402

WORKLOAD_BIN = os.path.join(HERE, "..", "bazel-bin", "tests", "lab", "guest_workload")


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        # The command name may hold spaces: the fields after it start past the last ')'.
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Unavailable(Exception):
    """This machine cannot run real guests; the message says why."""


def names(guests):
    return ["g%02d" % i for i in range(guests)]


@contextlib.contextmanager
def started(guests, memory_mib, workload="idle", prefix="plimsoll-bench-", workload_bin=WORKLOAD_BIN):
    problem = labmod.preflight_problem()
    if problem:
        raise Unavailable(problem)
    state = tempfile.mkdtemp(prefix=prefix)
    lab = labmod.Lab(state_dir=os.path.join(state, "lab"), workload_bin=workload_bin)
    lab.start()
    try:
        for n in names(guests):
            lab.add_guest(n, workload=workload, memory_mib=memory_mib)
        for n in names(guests):
            lab.wait_ready(n)
        yield lab
    finally:
        lab.stop()
