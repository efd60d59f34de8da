#!/bin/bash
# Runs a Python unittest file under `bazel test` with the system's python3 (Debian 12 has no
# `python`, which Bazel's own py_test stub asks for). $1: the test file, from the workspace root.
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
exec python3 "$1"
