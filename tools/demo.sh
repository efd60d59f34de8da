#!/bin/bash
# The plimsoll demo: three real QEMU guests (TCG) under a private libvirtd, a guest
# memory budget smaller than their total, plimsolld ballooning them, and a live table.
#   tools/demo.sh                       interactive; Ctrl-C tears everything down
#   tools/demo.sh --duration=120        non-interactive: print the table for 120 s, then stop
#   tools/demo.sh --policy=static       any policy plimsolld knows
# Metrics are served on 127.0.0.1:9587/metrics while it runs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

DURATION=0
POLICY=pagecache
BUDGET_MIB=2048
METRICS=127.0.0.1:9587
for arg in "$@"; do
  case "$arg" in
    --duration=*) DURATION="${arg#*=}" ;;
    --policy=*) POLICY="${arg#*=}" ;;
    --budget_mib=*) BUDGET_MIB="${arg#*=}" ;;
    --metrics_listen=*) METRICS="${arg#*=}" ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "demo: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "demo: run as root (the lab starts a private libvirtd and QEMU guests)" >&2
  exit 1
fi

tools/deps.sh
. tools/bazel_env.sh
echo "demo: building (bazel build)..."
bazel build //server:plimsolld //ctl:plimsollctl //tests/lab:guest_workload //agent:plimsoll-agent \
  //server/agent:plimsoll-agent-token 2>&1 | tail -2
BIN="$(bazel info bazel-bin 2>/dev/null)"
bazel shutdown >/dev/null 2>&1 || true

STATE=/tmp/plimsoll-demo
SOCK="$STATE/plimsolld.sock"
DAEMON_PID=""
cleanup() {
  trap - EXIT INT TERM
  echo
  echo "demo: tearing down"
  [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null && wait "$DAEMON_PID" 2>/dev/null || true
  python3 tools/demo_lab.py down --state "$STATE/lab" || true
  echo "demo: plimsolld log kept in /tmp/plimsoll-demo.log"
}
trap cleanup EXIT INT TERM

python3 tools/demo_lab.py down --state "$STATE/lab" >/dev/null 2>&1 || true
rm -rf "$STATE"
mkdir -p "$STATE"
echo "demo: starting the lab: stream (reads a 700 MiB file in a loop), hot (re-reads a 128 MiB file),"
echo "      anon (idle, allocates 400 MiB after 60 s); 1024 MiB each, no network, each running"
echo "      plimsoll-agent over its virtio-serial port; guest budget ${BUDGET_MIB} MiB"
LAB_OUT=$(python3 tools/demo_lab.py up --state "$STATE")
URI=$(echo "$LAB_OUT" | sed -n 's/^URI=//p')
[ -n "$URI" ] || { echo "demo: the lab did not start" >&2; exit 1; }

"$BIN/server/plimsolld" --libvirt_uri="$URI" --grpc_listen="unix:$SOCK" \
  --metrics_listen="$METRICS" --policy="$POLICY" --tick=2s \
  --guest_memory_budget_bytes=$((BUDGET_MIB * 1024 * 1024)) --host_reserve_bytes=0 \
  --agent_listen= \
  >/tmp/plimsoll-demo.log 2>&1 &
DAEMON_PID=$!
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.2; done
[ -S "$SOCK" ] || { echo "demo: plimsolld did not start:" >&2; cat /tmp/plimsoll-demo.log >&2; exit 1; }
echo "demo: plimsolld running (log /tmp/plimsoll-demo.log), metrics on http://$METRICS/metrics"

if [ "$DURATION" -gt 0 ]; then
  "$BIN/ctl/plimsollctl" --server="unix:$SOCK" top --interval=5s --count=$(( DURATION / 5 + 1 )) | cat
  echo "demo: balloon decisions taken:"
  grep -c "direction=inflate\|direction=deflate" /tmp/plimsoll-demo.log || true
  echo "demo: agent channels (virtio-serial) and reports:"
  python3 -c 'import sys, urllib.request
for l in urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=5).read().decode().splitlines():
    if l.startswith(("plimsoll_agent_channels{", "plimsoll_agent_reports_total")): print("  " + l)' "$METRICS" || true
else
  "$BIN/ctl/plimsollctl" --server="unix:$SOCK" top --interval=2s
fi
