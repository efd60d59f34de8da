#!/bin/sh
# A lab guest whose page cache is cold, then its agent (a lab run= hook: runs inside the guest,
# read from the host root over 9p). Mounts cgroup v2 (the lab's init does not, a distribution's
# does) so that the agent finds memory.reclaim, reads the lab's stream file once (cold cache:
# nothing reads it again), then runs tests/lab/run_agent.sh with the same kernel command line.
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null || echo "PLIMSOLL-READ error=mount_cgroup2"
cat /mnt/data/stream.bin > /dev/null
echo "PLIMSOLL-READ done"
exec "$(dirname "$0")/../lab/run_agent.sh"
