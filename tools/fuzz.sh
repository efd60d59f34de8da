#!/bin/bash
# Builds the libFuzzer targets (//fuzz, tagged fuzz_target) with clang, ASan and UBSan, and runs
# each for a bounded time starting from its seed corpus fuzz/corpus/<target>/. Prints one line per
# target (execs, execs/s, coverage and corpus growth) and exits non-zero when any target crashed,
# leaked, timed out or broke one of its checks; the input that did it is kept and named.
#
#   tools/fuzz.sh                       every target, 20 s each
#   tools/fuzz.sh --seconds=600 psi_fuzz   one target for 10 minutes (docs/fuzzing.md)
#   --seconds=N        time per target (default 20)
#   --workdir=DIR      grown corpora, crash inputs and logs (default /tmp/plimsoll-fuzz); kept
#                      between runs, so repeated runs start from what earlier ones found
#   --summary-file=F   write "passed failed skipped" (targets) to F, for tools/test.sh
#   --jobs=N           targets run at once (default: the number of cores)
#
# The build uses its own Bazel output base (.bazel-state/fuzz): clang there never invalidates
# the gcc build of the main output base. Needs Debian's clang and libclang-rt-14-dev.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

SECONDS_PER_TARGET=20
WORKDIR=/tmp/plimsoll-fuzz
SUMMARY_FILE=""
JOBS="$(nproc)"
TARGETS=()
for arg in "$@"; do
  case "$arg" in
    --seconds=*) SECONDS_PER_TARGET="${arg#*=}" ;;
    --workdir=*) WORKDIR="${arg#*=}" ;;
    --summary-file=*) SUMMARY_FILE="${arg#*=}" ;;
    --jobs=*) JOBS="${arg#*=}" ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz: unknown option $arg" >&2; exit 2 ;;
    *) TARGETS+=("${arg#//fuzz:}") ;;
  esac
done
[[ "$SECONDS_PER_TARGET" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --seconds must be a positive integer" >&2; exit 2; }
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --jobs must be a positive integer" >&2; exit 2; }

summary() {  # passed failed
  [ -n "$SUMMARY_FILE" ] && echo "$1 $2 0" > "$SUMMARY_FILE"
  return 0
}

# libFuzzer comes with clang's runtime (libclang-rt-14-dev), not with clang itself.
if ! command -v clang >/dev/null 2>&1 ||
   [ ! -f "$(clang -print-resource-dir 2>/dev/null)/lib/linux/libclang_rt.fuzzer-x86_64.a" ]; then
  echo "fuzz: clang or its libFuzzer runtime is missing (Debian: clang libclang-rt-14-dev; tools/deps.sh)" >&2
  summary 0 1
  exit 1
fi

. tools/bazel_env.sh
OUTPUT_BASE="$ROOT/.bazel-state/fuzz"
fbazel() { bazel --output_base="$OUTPUT_BASE" --max_idle_secs=600 "$@"; }

if [ ${#TARGETS[@]} -eq 0 ]; then
  mapfile -t TARGETS < <(fbazel query --noshow_progress 'attr(tags, fuzz_target, //fuzz:*)' 2>/dev/null |
                           sed 's|^//fuzz:||')
fi
if [ ${#TARGETS[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets found (bazel query failed?)" >&2
  summary 0 1
  exit 1
fi

# A target named twice would run twice at once in one work folder.
mapfile -t TARGETS < <(printf '%s\n' "${TARGETS[@]}" | awk '!seen[$0]++')
# The sanitizers' options as the Bazel tests run them (.bazelrc, build:asan).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

mkdir -p "$WORKDIR"
t0=$(date +%s)
LABELS=()
for t in "${TARGETS[@]}"; do LABELS+=("//fuzz:$t"); done
if ! fbazel build --config=fuzz "${LABELS[@]}" >"$WORKDIR/build.log" 2>&1; then
  grep -v "Cannot export local symbol" "$WORKDIR/build.log" | tail -30
  echo "fuzz: BUILD FAILED (log $WORKDIR/build.log)"
  summary 0 1
  exit 1
fi
BIN="$(fbazel info --config=fuzz bazel-bin 2>/dev/null)/fuzz"
echo "fuzz: built ${#TARGETS[@]} targets with clang + libFuzzer + ASan/UBSan in $(( $(date +%s) - t0 ))s;" \
     "${SECONDS_PER_TARGET}s each, $JOBS at once, work in $WORKDIR"

# The last value of "key: N" in a libFuzzer status line, e.g. field "cov" "#123 NEW cov: 45 ft: ...".
field() { grep -oE "$1: [0-9]+" | tail -1 | grep -oE '[0-9]+$'; }

# One target's run: its lines go to $WORKDIR/<target>/result, printed in order once all ran.
run_one() {
  local t="$1"
  local dir="$WORKDIR/$t"
  mkdir -p "$dir/corpus" "$dir/crashes"
  local seeds="$ROOT/fuzz/corpus/$t"
  local dict="" d
  for d in "fuzz/$t.dict" "fuzz/${t%%_*}.dict"; do
    [ -f "$d" ] && { dict="-dict=$ROOT/$d"; break; }
  done
  local before
  before=$(ls "$dir/crashes" | wc -l)
  # -timeout: any one input taking seconds breaks the parsers' linear-time promise.
  # timeout: a run libFuzzer's own timers do not end would hold the stage forever.
  timeout -k 10 $((SECONDS_PER_TARGET + 120)) \
  "$BIN/$t" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -timeout=5 \
    -rss_limit_mb=2048 -artifact_prefix="$dir/crashes/" $dict \
    "$dir/corpus" "$seeds" >"$dir/log" 2>&1
  local rc=$?
  local log="$dir/log"
  local execs rate new cov0 cov1 corp0 corp1 nseeds
  execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  new=$(grep -oE 'stat::new_units_added: *[0-9]+' "$log" | grep -oE '[0-9]+$')
  cov0=$(grep -E 'INITED' "$log" | field cov)
  cov1=$(grep -E '^#[0-9]+' "$log" | field cov)
  corp0=$(grep -E 'INITED' "$log" | grep -oE 'corp: [0-9]+' | grep -oE '[0-9]+$')
  corp1=$(grep -E '^#[0-9]+' "$log" | grep -oE 'corp: [0-9]+' | tail -1 | grep -oE '[0-9]+$')
  nseeds=$(ls "$seeds" 2>/dev/null | wc -l)
  {
    if [ "$rc" -eq 0 ]; then
      echo "fuzz $t: ok ${SECONDS_PER_TARGET}s, ${execs:-?} execs (${rate:-?}/s), cov ${cov0:-?} -> ${cov1:-?}," \
           "corpus ${corp0:-?} -> ${corp1:-?} (${nseeds} seeds, ${new:-0} new units)"
    else
      local artifact what
      artifact=$(ls -t "$dir/crashes" 2>/dev/null | head -1)
      what=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer|UndefinedBehaviorSanitizer)[^(]*|runtime error: .*|FUZZ_CHECK failed: .*' "$log")
      echo "fuzz $t: FAILED (exit $rc) after ${execs:-?} execs: ${what:-see log}"
      if [ "$(ls "$dir/crashes" | wc -l)" -gt "$before" ] && [ -n "$artifact" ]; then
        echo "  input: $dir/crashes/$artifact"
        echo "  reproduce: $BIN/$t $dir/crashes/$artifact   (or, with gcc: bazel build //fuzz:$t && bazel-bin/fuzz/$t FILE)"
      fi
      echo "  log: $log"
      grep -v "^#[0-9]" "$log" | tail -25 | sed 's/^/  | /'
    fi
  } >"$dir/result"
}

# libFuzzer runs one process per target: $JOBS targets at once use the cores for the same time each.
running=0
for t in "${TARGETS[@]}"; do
  rm -f "$WORKDIR/$t/result"
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait
passed=0; failed=0
for t in "${TARGETS[@]}"; do
  if [ -f "$WORKDIR/$t/result" ]; then cat "$WORKDIR/$t/result"; else echo "fuzz $t: FAILED (no result)"; fi
  if grep -q "^fuzz $t: ok" "$WORKDIR/$t/result" 2>/dev/null; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done

echo "fuzz: ${passed} targets passed, ${failed} failed ($(( $(date +%s) - t0 ))s)"
summary "$passed" "$failed"
[ "$failed" -eq 0 ]
