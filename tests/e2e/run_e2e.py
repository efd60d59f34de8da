#!/usr/bin/python3
"""Runs the end-to-end suites on real QEMU guests (tests/e2e/test_*.py and the lab
harness's own tests/lab/lab_test.py) and writes "passed failed skipped" to --summary-file."""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.realpath(os.path.join(HERE, "..", ".."))


class TimedResult(unittest.TextTestResult):
    """Wall seconds per test class, for the suite's length (the aim is < 25 min in all).

    A class's time runs from the previous class's last test to its own last one: its
    setUpClass (the lab's guests) counts to it, its tearDownClass to the next class."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.class_seconds = {}
        self._mark = time.monotonic()

    def stopTest(self, test):
        super().stopTest(test)
        now = time.monotonic()
        name = "%s.%s" % (type(test).__module__, type(test).__name__)
        self.class_seconds[name] = self.class_seconds.get(name, 0.0) + now - self._mark
        self._mark = now


# Rough seconds per module on the CI machine, to balance --jobs: a stale figure costs balance only.
MODULE_SECONDS = {"test_faults_e2e": 200, "test_deploy_e2e": 170, "test_guest_reclaim_e2e": 140,
                  "test_channel_e2e": 130, "test_balloon_e2e": 90, "test_hostile_agent_e2e": 80,
                  "test_agent_e2e": 70, "lab_test": 70, "test_pressure_e2e": 55,
                  "test_placement_e2e": 55, "test_lying_agent_e2e": 35, "test_vsock_e2e": 2}


def modules():
    names = ["lab_test"] + sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("test_") and f.endswith(".py"))
    return names


def shards(names, jobs):
    """The modules in `jobs` groups of about equal seconds, longest first (a module's classes
    stay together: the deploy tests install packages one after the other)."""
    groups = [[] for _ in range(jobs)]
    load = [0] * jobs
    for name in sorted(names, key=lambda n: -MODULE_SECONDS.get(n, 60)):
        i = load.index(min(load))
        groups[i].append(name)
        load[i] += MODULE_SECONDS.get(name, 60)
    return [g for g in groups if g]


def run_parallel(args):
    """Runs the modules in --jobs processes (each its own labs: libvirtd, guests, ports and state
    directories are per test class; the lab's artefact cache is locked) and sums their results.
    Each process's output is printed whole when it ends, so its failures stay next to its
    summary."""
    procs = []
    for group in shards(modules(), args.jobs):
        summary = tempfile.NamedTemporaryFile(prefix="plimsoll-e2e-shard-", delete=False).name
        log = tempfile.NamedTemporaryFile(prefix="plimsoll-e2e-shard-", suffix=".log", delete=False).name
        cmd = [sys.executable, os.path.abspath(__file__), "--modules", ",".join(group), "--summary-file", summary]
        if args.pattern:
            cmd += ["-k", args.pattern]
        with open(log, "w") as out:
            procs.append((group, summary, log, subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)))
    t0 = time.monotonic()
    totals = [0, 0, 0]
    for group, summary, log, p in procs:
        p.wait()
        with open(log) as f:
            print("=== e2e process for %s" % ", ".join(group))
            sys.stdout.write(f.read())
        try:
            with open(summary) as f:
                counts = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            counts = [0, 1, 0]  # the process died before writing its summary: a failure
        if len(counts) != 3:
            counts = [0, 1, 0]
        totals = [a + b for a, b in zip(totals, counts)]
        for path in (summary, log):
            os.unlink(path)
    print("e2e: %d passed, %d failed, %d skipped in %.0fs (%d processes)" % (
        totals[0], totals[1], totals[2], time.monotonic() - t0, len(procs)))
    if args.summary_file:
        with open(args.summary_file, "w") as f:
            f.write("%d %d %d\n" % tuple(totals))
    return 0 if totals[1] == 0 else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--summary-file")
    ap.add_argument("-k", dest="pattern", help="only tests whose id contains this")
    ap.add_argument("--jobs", type=int, default=1, help="run the test modules in this many processes")
    ap.add_argument("--modules", help="comma-separated module names (default: all)")
    args = ap.parse_args()
    if args.jobs > 1:
        return run_parallel(args)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    wanted = set(args.modules.split(",")) if args.modules else set(modules())
    if "lab_test" in wanted:
        suite.addTests(loader.discover(os.path.join(REPO, "tests", "lab"), pattern="lab_test.py",
                                       top_level_dir=os.path.join(REPO, "tests", "lab")))
    for name in sorted(wanted - {"lab_test"}):
        suite.addTests(loader.discover(HERE, pattern=name + ".py", top_level_dir=HERE))
    if args.pattern:
        def flatten(s):
            for t in s:
                if isinstance(t, unittest.TestSuite):
                    yield from flatten(t)
                else:
                    yield t
        suite = unittest.TestSuite(t for t in flatten(suite) if args.pattern in t.id())
    t0 = time.monotonic()
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout, resultclass=TimedResult).run(suite)
    print("e2e seconds by class: " + ", ".join(
        "%s %.0f" % (name, sec)
        for name, sec in sorted(result.class_seconds.items(), key=lambda kv: -kv[1])))
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    # A class skipped or failed in setUpClass is one entry here but no run test: not a pass.
    def ran(entries):
        return sum(1 for t, _ in entries if not isinstance(t, unittest.suite._ErrorHolder))
    passed = result.testsRun - ran(result.failures) - ran(result.errors) - len(result.unexpectedSuccesses) \
        - ran(result.skipped)
    print("e2e: %d passed, %d failed, %d skipped in %.0fs" % (passed, failed, skipped,
                                                                time.monotonic() - t0))
    if args.summary_file:
        with open(args.summary_file, "w") as f:
            f.write("%d %d %d\n" % (passed, failed, skipped))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
