#!/usr/bin/python3
"""Runs the end-to-end suites on real QEMU guests (tests/e2e/test_*.py and the lab
harness's own tests/lab/lab_test.py) and writes "passed failed skipped" to --summary-file."""

import argparse
import os
import sys
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--summary-file")
    ap.add_argument("-k", dest="pattern", help="only tests whose id contains this")
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    suite.addTests(loader.discover(os.path.join(REPO, "tests", "lab"), pattern="lab_test.py",
                                   top_level_dir=os.path.join(REPO, "tests", "lab")))
    suite.addTests(loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE))
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
