#!/bin/sh
# A lab guest whose page cache is cold, then its agent (a lab run= hook: runs inside the guest,
# read from the host root over 9p). Reads the lab's stream file once (cold cache: nothing reads
# it again), then runs tests/lab/run_agent.sh with the same kernel command line (which mounts
# cgroup v2, so that the agent finds memory.reclaim).
# With plimsoll.go_file=P on the command line, it also allocates plimsoll.step_mib=M MiB of
# anonymous memory once the host file P exists (or as many MiB as P holds, if it holds a number),
# and holds it (guest_workload anon prints "allocated_mib=M" when it has touched all of it).
GO=; STEP_MIB=500
for x in $(cat /proc/cmdline); do
  case "$x" in
    plimsoll.go_file=*) GO=${x#*=} ;;
    plimsoll.step_mib=*) STEP_MIB=${x#*=} ;;
    plimsoll.wl=*) WL=${x#*=} ;;
  esac
done
cat /mnt/data/stream.bin > /dev/null
echo "PLIMSOLL-READ done"
if [ -n "$GO" ] && [ -n "$WL" ]; then
  (while [ ! -e "$GO" ]; do sleep 0.5; done
   M=$(cat "$GO"); [ -n "$M" ] && STEP_MIB=$M
   echo "PLIMSOLL-ALLOC start mib=$STEP_MIB"
   "$WL" anon --mib "$STEP_MIB") &
fi
exec "$(dirname "$0")/../lab/run_agent.sh"
