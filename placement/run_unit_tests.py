#!/usr/bin/python3
"""Runs plimsoll-placement's unit tests (plimsoll_placement/*_test.py) and, under Bazel, writes
one JUnit <testcase> per test to $XML_OUTPUT_FILE, so tools/test.sh counts each of them."""

import os
import sys
import time
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))


class Recorder(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.cases = []
        self._t = 0.0

    def startTest(self, test):
        super().startTest(test)
        self._t = time.monotonic()

    def _add(self, test, outcome, detail=""):
        self.cases.append((test.id(), outcome, detail, time.monotonic() - self._t))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._add(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._add(test, "failure", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._add(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._add(test, "skipped", reason)


def main():
    sys.path.insert(0, HERE)
    suite = unittest.TestLoader().discover(os.path.join(HERE, "plimsoll_placement"), pattern="*_test.py",
                                           top_level_dir=HERE)
    result = unittest.TextTestRunner(verbosity=2, resultclass=Recorder).run(suite)
    out = os.environ.get("XML_OUTPUT_FILE")
    if out:
        root = ET.Element("testsuites")
        ts = ET.SubElement(root, "testsuite", name="plimsoll_placement", tests=str(len(result.cases)),
                           failures=str(len(result.failures)), errors=str(len(result.errors)))
        for name, outcome, detail, sec in result.cases:
            cls, _, meth = name.rpartition(".")
            tc = ET.SubElement(ts, "testcase", classname=cls, name=meth, time="%.3f" % sec)
            if outcome != "pass":
                ET.SubElement(tc, outcome, message=detail[:200]).text = detail
        ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)
    return 0 if result.wasSuccessful() and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
