#!/bin/bash
# Runs every plimsoll test: unit and libvirt test-driver integration tests under
# Bazel, then the end-to-end suite on real QEMU guests (tests/e2e). Installs what it
# needs first. Ends with one line "N passed, N failed, N skipped".
#   tools/test.sh            everything
#   tools/test.sh --unit     Bazel tests only
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-all}"

tools/deps.sh || { echo "0 passed, 1 failed"; exit 1; }
. tools/bazel_env.sh
trap 'bazel shutdown >/dev/null 2>&1 || true' EXIT

passed=0; failed=0; skipped=0
t0=$(date +%s)

echo "=== build (bazel build //...)"
if ! bazel build //... 2>&1 | tail -25; then :; fi
if ! bazel build //... >/dev/null 2>&1; then
  echo "BUILD FAILED"
  echo "0 passed, 1 failed"
  exit 1
fi
t_build=$(date +%s)

echo "=== unit and integration tests (bazel test //...)"
bazel test //... 2>&1 | grep -E "PASSED|FAILED|TIMEOUT|NO STATUS|Executed|ERROR" || true
# Count individual test cases from the JUnit XML every gtest target writes.
read -r u_pass u_fail u_skip < <(python3 tools/count_junit.py bazel-testlogs)
passed=$((passed + u_pass)); failed=$((failed + u_fail)); skipped=$((skipped + u_skip))
echo "bazel tests: ${u_pass} passed, ${u_fail} failed, ${u_skip} skipped ($(( $(date +%s) - t_build ))s)"
t_unit=$(date +%s)

if [ "$MODE" != "--unit" ]; then
  echo "=== end-to-end tests on real QEMU guests (tests/e2e)"
  bazel build //server:plimsolld //ctl:plimsollctl //tests/lab:guest_workload >/dev/null 2>&1
  out=$(mktemp)
  python3 tests/e2e/run_e2e.py --summary-file "$out"
  read -r e_pass e_fail e_skip < "$out" || { e_pass=0; e_fail=1; e_skip=0; }
  rm -f "$out"
  passed=$((passed + e_pass)); failed=$((failed + e_fail)); skipped=$((skipped + e_skip))
  echo "e2e tests: ${e_pass} passed, ${e_fail} failed, ${e_skip} skipped ($(( $(date +%s) - t_unit ))s)"
fi

echo "timings: build $((t_build - t0))s, bazel tests $((t_unit - t_build))s, total $(( $(date +%s) - t0 ))s"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
