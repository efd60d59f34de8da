#!/usr/bin/env python3
"""What the BLOCK group costs in plimsolld's bulk stats call, on real QEMU guests.

plimsolld reads each guest's disk reads with VIR_DOMAIN_STATS_BLOCK in the same
virConnectGetAllDomainStats call as the balloon stats (server/hypervisor/block_reads.h). For a
running domain libvirt answers the block group by asking QEMU (query-blockstats and, for
capacity, the block nodes): one or two more monitor round trips per domain and call. This
starts a private libvirtd with --guests real guests (tests/lab) and times `virsh domstats`
with the groups plimsolld asks for, with and without --block, alternating, --calls times each.
virsh's own start-up is in both arms; the difference is the block group's cost.

  python3 bench/block_stats_cost.py --guests=4 --calls=60 [--workload=stream]

Prints per-call medians and p90 in ms and the difference per domain. Results and the command
are in docs/benchmarks.md ("The block group's cost").
"""
import argparse
import statistics
import subprocess
import sys
import time

import guest_lab


def timed(virsh_base, args):
    t0 = time.monotonic()
    out = subprocess.run(virsh_base + args, capture_output=True, text=True, timeout=60)
    took = (time.monotonic() - t0) * 1000
    if out.returncode != 0:
        raise RuntimeError("virsh %s failed: %s" % (" ".join(args), out.stderr.strip()))
    return took, out.stdout


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--guests", type=int, default=4)
    ap.add_argument("--memory-mib", type=int, default=512)
    ap.add_argument("--calls", type=int, default=60, help="calls per arm")
    ap.add_argument("--workload", default="idle", help="the guests' workload (tests/lab: idle, stream, ...)")
    ap.add_argument("--workload-bin", default=guest_lab.WORKLOAD_BIN)
    args = ap.parse_args()
    try:
        with guest_lab.started(args.guests, args.memory_mib, args.workload, "plimsoll-blockcost-",
                               args.workload_bin) as lab:
            return measure(args, lab)
    except guest_lab.Unavailable as e:
        print("cannot run real guests here: %s" % e)
        return 2


def measure(args, lab):
    """Times the two arms on the started lab; prints the medians."""
    base = ["virsh", "-c", lab.uri, "domstats", "--state", "--balloon"]
    # Warm up both arms (libvirtd caches, the first monitor commands).
    for _ in range(3):
        timed(base, [])
        _, out = timed(base, ["--block"])
    blocks = sum(1 for line in out.splitlines() if line.strip().startswith("block.count="))
    plain, block = [], []
    for _ in range(args.calls):
        plain.append(timed(base, [])[0])
        block.append(timed(base, ["--block"])[0])
    mp, mb = statistics.median(plain), statistics.median(block)
    print("%d guests (%s, %d MiB), %d calls per arm, %d domains answered the block group"
          % (args.guests, args.workload, args.memory_mib, args.calls, blocks))
    print("  --state --balloon          median %.1f ms  p90 %.1f ms" % (mp, pct(plain, 0.9)))
    print("  --state --balloon --block  median %.1f ms  p90 %.1f ms" % (mb, pct(block, 0.9)))
    print("  the block group: +%.1f ms a call, %.2f ms a domain (medians)"
          % (mb - mp, (mb - mp) / max(1, args.guests)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
