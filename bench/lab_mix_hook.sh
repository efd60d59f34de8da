#!/bin/sh
# The lab's run= hook of bench/lab_policy_bench.py's mixes whose guests act on the measured run's
# clock (the generated mixes' allocations, the coldcache mix's readers): runs inside the guest,
# read from the host root over 9p. A guest has a single run= hook, so this one also starts
# plimsoll-agent (tests/lab/run_agent.sh) when the command line asks for one.
#   plimsoll.go_file=P      a host path the bench creates when the measured run starts
#   plimsoll.readonce=F     when it does, read file F once (guest_workload readonce: cold cache)
#   plimsoll.alloc_mib=N    and, plimsoll.alloc_after=S seconds after it, one allocation of N MiB
#   plimsoll.alloc_after=S  of anonymous memory, touched at full speed and held for good, by
#                           guest_workload anon (its "allocating_mib=" and "allocated_mib=" lines
#                           on the console time it)
#   plimsoll.wl=PATH        guest_workload (the lab puts it there)
for x in $(cat /proc/cmdline); do
  case "$x" in
    plimsoll.go_file=*) GO=${x#*=} ;;
    plimsoll.readonce=*) READ=${x#*=} ;;
    plimsoll.alloc_mib=*) MIB=${x#*=} ;;
    plimsoll.alloc_after=*) AFTER=${x#*=} ;;
    plimsoll.wl=*) WL=${x#*=} ;;
    plimsoll.agent_bin=*) AGENT=1 ;;
  esac
done
HERE=$(dirname "$0")
[ -n "$AGENT" ] && "$HERE/../tests/lab/run_agent.sh" &
[ -n "$MIB$READ" ] || { wait; exit 0; }
[ -n "$GO" ] && [ -n "$WL" ] || { echo "PLIMSOLL-MIX error=missing_cmdline"; wait; exit 1; }
while [ ! -e "$GO" ]; do sleep 0.2; done
echo "PLIMSOLL-MIX go alloc_mib=${MIB:-0} after=${AFTER:-0} readonce=${READ:-}"
[ -n "$READ" ] && "$WL" readonce "$READ" &
[ -n "$MIB" ] && "$WL" anon --mib "$MIB" --after "${AFTER:-0}" &
wait
