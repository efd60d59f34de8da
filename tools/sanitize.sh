#!/bin/bash
# Builds and runs the Bazel tests (unit, integration on libvirt's test driver; the fuzz corpus
# replays only when named, as tools/fuzz.sh runs them under clang) under clang's AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer (--config=asan,
# .bazelrc): any memory error, leak or undefined behaviour fails its test. Counts test cases from
# the JUnit XML like tools/test.sh and ends with "asan: N passed, N failed, N skipped".
#
#   tools/sanitize.sh                    every test in //... but //fuzz's (below)
#   tools/sanitize.sh //common/...       only these targets
#   --summary-file=F   write "passed failed skipped" to F, for tools/test.sh
#   --build-everything also build what no test needs (benchmarks, the simulator's binary): the
#                      full suite's only build of those (tools/test.sh)
#
# Its own Bazel output base (.bazel-state/asan), so the main gcc build's cache, its server and the
# bazel-* symlinks are left alone. Needs nothing beyond tools/deps.sh (clang and its sanitizer
# runtimes, which tools/fuzz.sh needs too). Clang, not gcc: it compiles the tree under ASan and
# UBSan in about half gcc's time, and checks the ABSL_GUARDED_BY annotations gcc ignores.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SUMMARY_FILE=""
BUILD_TESTS_ONLY=(--build_tests_only)
PATTERNS=()
for arg in "$@"; do
  case "$arg" in
    --summary-file=*) SUMMARY_FILE="${arg#*=}" ;;
    --build-everything) BUILD_TESTS_ONLY=() ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "sanitize: unknown option $arg" >&2; exit 2 ;;
    *) PATTERNS+=("$arg") ;;
  esac
done
DEFAULT_PATTERNS=0
if [ ${#PATTERNS[@]} -eq 0 ]; then
  DEFAULT_PATTERNS=1
  # //... spelled out per top-level directory: from another output base, Bazel would walk into
  # the bazel-* convenience symlinks of the main one and load their external packages.
  PATTERNS=(//:all)
  for d in */; do
    d="${d%/}"
    case "$d" in bazel-*) continue ;; esac
    [ -n "$(find "$d" \( -name BUILD -o -name BUILD.bazel \) -print -quit)" ] && PATTERNS+=("//$d/...")
  done
fi
# Left out of the default run, with the reason (the real-guest tests are not Bazel tests, and
# //tests/lab:lab_test is tagged manual):
#  - the fuzz harnesses and their corpus replays: tools/fuzz.sh builds the same harnesses with
#    clang, ASan and UBSan, and libFuzzer runs every seed input before it mutates any, so here they
#    would be compiled twice more (binary and replay test) for the same check (tools/fuzz.sh
#    sets the same sanitizer options). With --build-everything their seed generator is built.
EXCLUDED=()
[ "$DEFAULT_PATTERNS" = 1 ] && EXCLUDED=(-//fuzz/... //fuzz:agent_seed_gen)

. tools/bazel_env.sh
OUTPUT_BASE="$ROOT/.bazel-state/asan"
abazel() { bazel --output_base="$OUTPUT_BASE" --max_idle_secs=600 "$@"; }

t0=$(date +%s)
LOG=$(mktemp /tmp/plimsoll-asan.XXXXXX)
# --build_tests_only (unless --build-everything): binaries no test needs are not built twice;
# sanitizer findings print in the failing test's log (--test_output=errors from .bazelrc).
abazel test --config=asan "${BUILD_TESTS_ONLY[@]}" --keep_going -- "${PATTERNS[@]}" "${EXCLUDED[@]}" >"$LOG" 2>&1
rc=$?
grep -E "PASSED|FAILED|TIMEOUT|NO STATUS|FLAKY|Executed|^ERROR|ERROR: (Address|Leak|Undefined)Sanitizer|runtime error:|SUMMARY: " "$LOG" || true
if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
  # Not "some tests failed": the build itself failed (or no test ran).
  tail -30 "$LOG"
fi
TESTLOGS="$(abazel info --config=asan bazel-testlogs 2>/dev/null)"
# Count the targets of this run only (cached results included), from Bazel's summary lines;
# a target that failed to build or has no log counts as one failure.
a_pass=0; a_fail=0; a_skip=0; targets=0
while read -r label status; do
  targets=$((targets + 1))
  dir="$TESTLOGS/$(echo "${label#//}" | tr ':' '/')"
  if [ "$status" != bad ] && [ -d "$dir" ]; then
    read -r p f s < <(python3 tools/count_junit.py "$dir")
    # A failed or timed-out target is never counted as clean, whatever its XML says.
    [ "$status" = fail ] && [ "$f" -eq 0 ] && f=1
  else
    p=0; f=1; s=0
  fi
  if [ "$f" -gt 0 ] && [ -f "$dir/test.log" ]; then
    echo "--- $label: what failed"
    grep -E "Sanitizer|runtime error|SUMMARY|Failure|FAILED|Expected|Which is|Value of|  #[0-9]+ 0x" \
      "$dir/test.log" | head -40 | sed 's/^/  | /'
  fi
  a_pass=$((a_pass + p)); a_fail=$((a_fail + f)); a_skip=$((a_skip + s))
done < <(grep -E '^//[^ ]+ +' "$LOG" | awk '{ st = "bad"
    if ($0 ~ /(PASSED|FLAKY)/) st = "ok"; else if ($0 ~ /(FAILED in|TIMEOUT)/) st = "fail"
    print $1, st }')
if [ "$targets" -eq 0 ] || { [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ] && [ "$a_fail" -eq 0 ]; }; then
  a_fail=$((a_fail + 1))  # the build failed or no test ran: never report a clean run
fi
rm -f "$LOG"
echo "asan: ${a_pass} passed, ${a_fail} failed, ${a_skip} skipped ($(( $(date +%s) - t0 ))s)"
[ -n "$SUMMARY_FILE" ] && echo "$a_pass $a_fail $a_skip" > "$SUMMARY_FILE"
[ "$a_fail" -eq 0 ]
