#!/bin/sh
# Runs plimsoll-agent inside a lab guest (the lab's run= hook; this file is read from the
# host root shared over 9p). Mounts cgroup v2 at /sys/fs/cgroup first when it is not there, so
# that the agent finds memory.reclaim. The host passes everything on the kernel command line:
#   plimsoll.agent_bin=PATH      the agent binary on the host (bazel-bin/agent/plimsoll-agent)
#   plimsoll.agent_server=S      the agent's --server, e.g. virtio-serial:org.plimsoll.agent.0
#                                (the guest's own channel: no network, no token); when unset:
#   plimsoll.agent_port=PORT     plimsolld's agent listener on host 127.0.0.1, seen as 10.0.2.2
#   plimsoll.token=HEX           this guest's identity token (read by --token_from_cmdline)
#   plimsoll.agent_interval=DUR  report interval (default 2s)
#   plimsoll.agent_args=A,B      extra agent flags, comma separated (e.g. for tests)
#   plimsoll.agent_stop_file=P   a host path; when it appears the agent is killed (tests use it
#                                to take an agent away without touching the guest)
#   plimsoll.agent_kill_file=P   a host path; whenever its content changes the agent is killed
#                                (SIGKILL) and started again, as systemd's Restart= would
for x in $(cat /proc/cmdline); do
  case "$x" in
    plimsoll.agent_bin=*) BIN=${x#*=} ;;
    plimsoll.agent_server=*) SERVER=${x#*=} ;;
    plimsoll.agent_port=*) PORT=${x#*=} ;;
    plimsoll.agent_interval=*) INTERVAL=${x#*=} ;;
    plimsoll.agent_args=*) EXTRA=$(echo "${x#*=}" | tr ',' ' ') ;;
    plimsoll.agent_stop_file=*) STOP=${x#*=} ;;
    plimsoll.agent_kill_file=*) KILL=${x#*=} ;;
  esac
done
if [ -n "$SERVER" ]; then
  [ -n "$BIN" ] || { echo "PLIMSOLL-AGENT error=missing_cmdline bin=$BIN"; exit 1; }
  ARGS="--server=$SERVER --interval=${INTERVAL:-2s}"
else
  [ -n "$BIN" ] && [ -n "$PORT" ] || { echo "PLIMSOLL-AGENT error=missing_cmdline bin=$BIN port=$PORT"; exit 1; }
  SERVER=10.0.2.2:$PORT
  ARGS="--server=$SERVER --token_from_cmdline --interval=${INTERVAL:-2s}"
fi
# The agent's in-guest reclaim writes /sys/fs/cgroup/memory.reclaim (cgroup v2). The lab's init
# does not mount cgroup2 (a distribution's does): mount it when nothing is there. Harmless when
# the host sends no reclaim bounds: the agent then reclaims nothing.
if [ ! -e /sys/fs/cgroup/cgroup.controllers ]; then
  mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null || echo "PLIMSOLL-AGENT error=mount_cgroup2"
fi
echo "PLIMSOLL-AGENT starting server=$SERVER"
if [ -n "$KILL" ]; then
  SEEN=$(cat "$KILL" 2>/dev/null)
  while :; do
    # shellcheck disable=SC2086
    "$BIN" $ARGS $EXTRA &
    AGENT=$!
    echo "PLIMSOLL-AGENT started pid=$AGENT"
    while kill -0 "$AGENT" 2>/dev/null; do
      NOW=$(cat "$KILL" 2>/dev/null)
      if [ "$NOW" != "$SEEN" ]; then
        SEEN=$NOW
        kill -9 "$AGENT"
        echo "PLIMSOLL-AGENT killed (kill file $KILL: $NOW)"
      fi
      sleep 0.2
    done
    wait "$AGENT" 2>/dev/null
    sleep 0.5
  done
fi
if [ -z "$STOP" ]; then
  # shellcheck disable=SC2086
  exec "$BIN" $ARGS $EXTRA
fi
# shellcheck disable=SC2086
"$BIN" $ARGS $EXTRA &
AGENT=$!
while kill -0 "$AGENT" 2>/dev/null; do
  if [ -e "$STOP" ]; then
    kill -9 "$AGENT"
    echo "PLIMSOLL-AGENT killed (stop file $STOP)"
    exit 0
  fi
  sleep 0.5
done
