#!/bin/bash
# Runs every plimsoll test: the Bazel tests (unit, and integration on libvirt's test driver)
# under ASan/LSan/UBSan, a bounded libFuzzer run of every parser, then the end-to-end suite on
# real QEMU guests (tests/e2e). Installs what it needs first. Ends with one line
# "N passed, N failed, N skipped".
#   tools/test.sh            everything
#   tools/test.sh --unit     the Bazel tests only, without the sanitizers (quick)
# The full run builds everything once under the sanitizers and, without them, only the
# binaries the end-to-end suite runs: the sanitizer run is the Bazel tests' only run, so the
# tree is built in full once, not twice.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE="${1:-all}"

tools/deps.sh || { echo "0 passed, 1 failed"; exit 1; }
. tools/bazel_env.sh
trap 'bazel shutdown >/dev/null 2>&1 || true
  bazel --output_base="$ROOT/.bazel-state/asan" shutdown >/dev/null 2>&1 || true
  bazel --output_base="$ROOT/.bazel-state/fuzz" shutdown >/dev/null 2>&1 || true' EXIT

passed=0; failed=0; skipped=0
t0=$(date +%s)
# Every stage's output also goes here, so the names of what failed can be repeated at the end,
# next to the summary line (a CI log cut to its tail still says which test failed).
logs=$(mktemp -d)

# The binaries the end-to-end suite (and the demo) run, without sanitizers; --unit: everything.
E2E_BINARIES=(//server:plimsolld //ctl:plimsollctl //tests/lab:guest_workload //agent:plimsoll-agent
              //server/agent:plimsoll-agent-token //server/agent:plimsoll-agent-sink)
if [ "$MODE" = "--unit" ]; then BUILD=(//...); else BUILD=("${E2E_BINARIES[@]}"); fi
echo "=== build (bazel build ${BUILD[*]})"
if ! bazel build "${BUILD[@]}" 2>&1 | tail -25; then :; fi
if ! bazel build "${BUILD[@]}" >/dev/null 2>&1; then
  echo "BUILD FAILED"
  echo "0 passed, 1 failed"
  exit 1
fi
t_build=$(date +%s)

t_unit=$t_build
if [ "$MODE" = "--unit" ]; then
echo "=== unit and integration tests (bazel test //...)"
bazel test //... 2>&1 | tee "$logs/bazel" | grep -E "PASSED|FAILED|TIMEOUT|NO STATUS|Executed|ERROR" || true
# Count individual test cases from the JUnit XML every gtest target writes.
read -r u_pass u_fail u_skip < <(python3 tools/count_junit.py bazel-testlogs)
passed=$((passed + u_pass)); failed=$((failed + u_fail)); skipped=$((skipped + u_skip))
echo "bazel tests: ${u_pass} passed, ${u_fail} failed, ${u_skip} skipped ($(( $(date +%s) - t_build ))s)"
t_unit=$(date +%s)
fi

t_asan=$t_unit; t_fuzz=$t_unit
if [ "$MODE" != "--unit" ]; then
echo "=== every Bazel target built, and every Bazel test run, under ASan/LSan/UBSan (tools/sanitize.sh; the fuzz harnesses in the fuzz stage)"
s_sum=$(mktemp)
tools/sanitize.sh --build-everything --summary-file="$s_sum" 2>&1 | tee "$logs/asan" | tail -15
read -r s_pass s_fail s_skip < "$s_sum" || { s_pass=0; s_fail=1; s_skip=0; }
passed=$((passed + s_pass)); failed=$((failed + s_fail)); skipped=$((skipped + s_skip))
echo "sanitizer tests: ${s_pass} passed, ${s_fail} failed, ${s_skip} skipped ($(( $(date +%s) - t_unit ))s)"
t_asan=$(date +%s)

echo "=== fuzzing: every libFuzzer target for a bounded time (tools/fuzz.sh)"
f_sum=$(mktemp)
tools/fuzz.sh --seconds="${PLIMSOLL_FUZZ_SECONDS:-10}" --summary-file="$f_sum" 2>&1 | tee "$logs/fuzz" | tail -12
read -r f_pass f_fail f_skip < "$f_sum" || { f_pass=0; f_fail=1; f_skip=0; }
passed=$((passed + f_pass)); failed=$((failed + f_fail)); skipped=$((skipped + f_skip))
echo "fuzz targets: ${f_pass} passed, ${f_fail} failed, ${f_skip} skipped ($(( $(date +%s) - t_asan ))s)"
rm -f "$s_sum" "$f_sum"
t_fuzz=$(date +%s)
fi

if [ "$MODE" != "--unit" ]; then
  echo "=== end-to-end tests on real QEMU guests (tests/e2e)"
  out=$(mktemp)
  # Not through a pipe: the lab starts daemons that could hold it open. Its failures print at
  # the end of its own output, next to the summary line anyway. Two processes: most of an
  # end-to-end test is waiting for guests, ticks and stats periods, not CPU.
  python3 tests/e2e/run_e2e.py --jobs "${PLIMSOLL_E2E_JOBS:-2}" --summary-file "$out"
  read -r e_pass e_fail e_skip < "$out" || { e_pass=0; e_fail=1; e_skip=0; }
  rm -f "$out"
  passed=$((passed + e_pass)); failed=$((failed + e_fail)); skipped=$((skipped + e_skip))
  echo "e2e tests: ${e_pass} passed, ${e_fail} failed, ${e_skip} skipped ($(( $(date +%s) - t_fuzz ))s)"
fi

if [ "$failed" -ne 0 ]; then
  echo "=== what failed, by stage"
  for stage in bazel asan fuzz; do
    [ -f "$logs/$stage" ] || continue
    grep -E "^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS)|^--- //[^ ]+: what failed|^fuzz [^ ]+: FAILED" \
      "$logs/$stage" | sed -E "s/ in [0-9.]+s$//; s/^/$stage: /" | sort -u | head -20
  done
fi
rm -rf "$logs"
echo "timings: build $((t_build - t0))s, bazel tests (--unit) $((t_unit - t_build))s, sanitizers $((t_asan - t_unit))s, fuzz $((t_fuzz - t_asan))s, total $(( $(date +%s) - t0 ))s"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[ "$failed" -eq 0 ]
