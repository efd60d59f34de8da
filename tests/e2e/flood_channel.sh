#!/bin/sh
# A hostile guest flooding its own agent channel (a lab run= hook: runs inside the guest, read
# from the host root over 9p). It waits for the host file plimsoll.flood_file=P, then writes
# random bytes without pause, 4 MiB at a time, to where P's content says:
#   cpu    /dev/null: the same CPU burn without the channel (the test's control)
#   port   the org.plimsoll.agent.0 port (again whenever the host end hangs up)
# test_channel_e2e.py measures the other guests' report age meanwhile.
for x in $(cat /proc/cmdline); do
  case "$x" in
    plimsoll.flood_file=*) FLOOD=${x#*=} ;;
  esac
done
[ -n "$FLOOD" ] || { echo "PLIMSOLL-FLOOD error=missing_cmdline"; exit 1; }
while [ ! -e "$FLOOD" ]; do sleep 0.5; done
PORT=
while [ -z "$PORT" ]; do
  for d in /sys/class/virtio-ports/*; do
    [ "$(cat "$d/name" 2>/dev/null)" = org.plimsoll.agent.0 ] && PORT=/dev/${d##*/}
  done
  [ -n "$PORT" ] || sleep 0.5
done
MODE=
while :; do
  NOW=$(cat "$FLOOD" 2>/dev/null)
  if [ "$NOW" != "$MODE" ]; then
    MODE=$NOW
    echo "PLIMSOLL-FLOOD start mode=$MODE port=$PORT"
  fi
  case "$MODE" in
    port) head -c 4194304 /dev/urandom > "$PORT" 2>/dev/null || sleep 0.01 ;;
    *) head -c 4194304 /dev/urandom > /dev/null ;;
  esac
done
