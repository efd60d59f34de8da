#!/bin/sh
# A guest whose demand grows in steps (a lab run= hook: runs inside the guest, read from the host
# root over 9p). Once the host file plimsoll.go_file=P exists, it starts plimsoll.steps=K
# allocations of plimsoll.step_mib=M MiB of anonymous memory, one every plimsoll.every=S seconds,
# each held for good (guest_workload anon prints "allocated_mib=M" when it has touched all of it).
STEPS=5; STEP_MIB=100; EVERY=10
for x in $(cat /proc/cmdline); do
  case "$x" in
    plimsoll.go_file=*) GO=${x#*=} ;;
    plimsoll.steps=*) STEPS=${x#*=} ;;
    plimsoll.step_mib=*) STEP_MIB=${x#*=} ;;
    plimsoll.every=*) EVERY=${x#*=} ;;
    plimsoll.wl=*) WL=${x#*=} ;;
  esac
done
[ -n "$GO" ] && [ -n "$WL" ] || { echo "PLIMSOLL-STEPS error=missing_cmdline"; exit 1; }
while [ ! -e "$GO" ]; do sleep 0.5; done
echo "PLIMSOLL-STEPS start steps=$STEPS step_mib=$STEP_MIB every=$EVERY"
i=0
while [ "$i" -lt "$STEPS" ]; do
  "$WL" anon --mib "$STEP_MIB" &
  i=$((i + 1))
  sleep "$EVERY"
done
wait
