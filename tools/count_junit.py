#!/usr/bin/env python3
"""Sums test cases over every test.xml under a bazel-testlogs folder.

Prints "passed failed skipped". A target that crashed before writing its XML
(no test.xml but a test.log) counts as one failure, so nothing is lost silently.
"""
import os
import sys
import xml.etree.ElementTree as ET


def main(root):
    passed = failed = skipped = 0
    for dirpath, _, files in os.walk(root, followlinks=True):
        if "test.log" not in files:
            continue
        if "test.xml" not in files:
            failed += 1
            continue
        try:
            tree = ET.parse(os.path.join(dirpath, "test.xml"))
        except ET.ParseError:
            failed += 1
            continue
        cases = list(tree.iter("testcase"))
        if not cases:
            # Bazel's own XML for a non-gtest target: judge by the suite's failure count.
            suite_failed = any(int(s.get("failures", "0")) + int(s.get("errors", "0")) > 0
                               for s in tree.iter("testsuite"))
            failed += 1 if suite_failed else 0
            passed += 0 if suite_failed else 1
            continue
        for case in cases:
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.find("skipped") is not None or case.get("result") == "skipped" \
                    or case.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    print(passed, failed, skipped)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bazel-testlogs")
