#!/bin/bash
# Bazel wrapper: the tests run on Debian's /usr/bin/python3, as the service does.
set -eu
exec /usr/bin/python3 "${TEST_SRCDIR}/${TEST_WORKSPACE}/placement/run_unit_tests.py"
