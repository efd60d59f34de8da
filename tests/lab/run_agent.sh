#!/bin/sh
# Runs plimsoll-agent inside a lab guest (the lab's run= hook; this file is read from the
# host root shared over 9p). The host passes everything on the kernel command line:
#   plimsoll.agent_bin=PATH      the agent binary on the host (bazel-bin/agent/plimsoll-agent)
#   plimsoll.agent_port=PORT     plimsolld's agent listener on host 127.0.0.1, seen as 10.0.2.2
#   plimsoll.agent_interval=DUR  report interval (default 2s)
#   plimsoll.token=HEX           this guest's identity token (read by --token_from_cmdline)
#   plimsoll.agent_args=A,B      extra agent flags, comma separated (e.g. for tests)
#   plimsoll.agent_stop_file=P   a host path; when it appears the agent is killed (tests use it
#                                to take an agent away without touching the guest)
for x in $(cat /proc/cmdline); do
  case "$x" in
    plimsoll.agent_bin=*) BIN=${x#*=} ;;
    plimsoll.agent_port=*) PORT=${x#*=} ;;
    plimsoll.agent_interval=*) INTERVAL=${x#*=} ;;
    plimsoll.agent_args=*) EXTRA=$(echo "${x#*=}" | tr ',' ' ') ;;
    plimsoll.agent_stop_file=*) STOP=${x#*=} ;;
  esac
done
[ -n "$BIN" ] && [ -n "$PORT" ] || { echo "PLIMSOLL-AGENT error=missing_cmdline bin=$BIN port=$PORT"; exit 1; }
echo "PLIMSOLL-AGENT starting server=10.0.2.2:$PORT"
if [ -z "$STOP" ]; then
  # shellcheck disable=SC2086
  exec "$BIN" --server=10.0.2.2:"$PORT" --token_from_cmdline --interval="${INTERVAL:-2s}" $EXTRA
fi
# shellcheck disable=SC2086
"$BIN" --server=10.0.2.2:"$PORT" --token_from_cmdline --interval="${INTERVAL:-2s}" $EXTRA &
AGENT=$!
while kill -0 "$AGENT" 2>/dev/null; do
  if [ -e "$STOP" ]; then
    kill -9 "$AGENT"
    echo "PLIMSOLL-AGENT killed (stop file $STOP)"
    exit 0
  fi
  sleep 0.5
done
