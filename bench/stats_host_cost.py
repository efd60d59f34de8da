#!/usr/bin/env python3
"""What a guest's stats cost the host outside plimsolld: libvirtd's and QEMU's CPU per domain.

Each tick plimsolld asks libvirt for every running guest's state, balloon and block stats in
one virConnectGetAllDomainStats call (server/hypervisor/bulk_stats.h); libvirtd answers each
domain with QEMU monitor round trips. That work is the host's price of a tick, beside
plimsolld's own CPU (bench/tick_profile.py), and it grows with the guests the same way.

This starts a private libvirtd with --guests real idle guests (tests/lab), then:
  1. idle: --idle-seconds without calls, for the guests' and libvirtd's own burn;
  2. calls: one virsh session (one connection) running `domstats --state --balloon --block`
     --calls times, as fast as libvirtd answers.
From /proc/PID/stat it charges libvirtd and the QEMU processes the CPU of phase 2 less their
idle rate over its wall time, per call and per domain. Run it with two guest counts: the
difference of the per-call costs over the difference of the counts is the cost of one more
domain, without the per-call part.

  python3 bench/stats_host_cost.py --guests=1 --calls=300 --json=docs/bench/stats_host_cost_1.json
  python3 bench/stats_host_cost.py --guests=4 --calls=300 --json=docs/bench/stats_host_cost_4.json

Results: docs/benchmarks.md ("Control loop at scale").
"""
import argparse
import json
import subprocess
import sys
import time

import guest_lab
from guest_lab import labmod

def cpu_of(pids):
    return {p: guest_lab.cpu_seconds(p) for p in pids}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--guests", type=int, default=4)
    ap.add_argument("--memory-mib", type=int, default=512)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--idle-seconds", type=float, default=30)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--workload-bin", default=guest_lab.WORKLOAD_BIN)
    args = ap.parse_args()
    try:
        with guest_lab.started(args.guests, args.memory_mib, "idle", "plimsoll-statscost-", args.workload_bin) as lab:
            return measure(args, lab)
    except guest_lab.Unavailable as e:
        print("cannot run real guests here: %s" % e)
        return 2


def measure(args, lab):
    """Runs the idle and call phases on the started lab; prints and writes the figures."""
    libvirtd = lab.libvirtd_pid()
    qemus = labmod.lab_qemu_pids(lab.state_dir)
    if libvirtd is None or len(qemus) != args.guests:
        raise RuntimeError("libvirtd pid %s, %d QEMU processes for %d guests" % (libvirtd, len(qemus), args.guests))
    command = "domstats --state --balloon --block\n"
    virsh = ["virsh", "-q", "-c", lab.uri]
    # Warm-up: libvirtd's caches and each monitor's first commands.
    subprocess.run(virsh, input=command * 5, capture_output=True, text=True, check=True, timeout=120)

    t0, d0, q0 = time.monotonic(), guest_lab.cpu_seconds(libvirtd), cpu_of(qemus)
    time.sleep(args.idle_seconds)
    t1, d1, q1 = time.monotonic(), guest_lab.cpu_seconds(libvirtd), cpu_of(qemus)
    out = subprocess.run(virsh, input=command * args.calls, capture_output=True, text=True, timeout=1800)
    t2, d2, q2 = time.monotonic(), guest_lab.cpu_seconds(libvirtd), cpu_of(qemus)
    if out.returncode != 0:
        raise RuntimeError("virsh failed: %s" % out.stderr.strip())
    answered = out.stdout.count("balloon.current=")
    if answered != args.calls * args.guests:
        raise RuntimeError("%d balloon records for %d calls x %d guests" % (answered, args.calls, args.guests))

    idle_wall, call_wall = t1 - t0, t2 - t1
    libvirtd_idle_rate = (d1 - d0) / idle_wall
    qemu_idle_rate = sum(q1[p] - q0[p] for p in qemus) / idle_wall
    libvirtd_calls = (d2 - d1) - libvirtd_idle_rate * call_wall
    qemu_calls = sum(q2[p] - q1[p] for p in qemus) - qemu_idle_rate * call_wall
    per_call_ms = lambda s: 1000.0 * s / args.calls  # noqa: E731
    result = {
        "guests": args.guests,
        "memory_mib": args.memory_mib,
        "calls": args.calls,
        "command": command.strip(),
        "idle_seconds": idle_wall,
        "call_seconds": call_wall,
        "libvirtd_idle_cpu_share": libvirtd_idle_rate,
        "qemu_idle_cpu_share": qemu_idle_rate,
        "wall_ms_per_call": 1000.0 * call_wall / args.calls,
        "libvirtd_ms_per_call": per_call_ms(libvirtd_calls),
        "qemu_ms_per_call": per_call_ms(qemu_calls),
        "libvirtd_ms_per_domain": per_call_ms(libvirtd_calls) / args.guests,
        "qemu_ms_per_domain": per_call_ms(qemu_calls) / args.guests,
    }
    print("%d idle guests (%d MiB), %d calls of `%s` in one virsh session" %
          (args.guests, args.memory_mib, args.calls, command.strip()))
    print("  wall %.2f ms a call; idle burn: libvirtd %.1f%%, QEMU %.1f%% of a core" %
          (result["wall_ms_per_call"], 100 * libvirtd_idle_rate, 100 * qemu_idle_rate))
    print("  CPU a call beyond idle: libvirtd %.2f ms, QEMU %.2f ms (a domain: %.2f, %.2f ms)" %
          (result["libvirtd_ms_per_call"], result["qemu_ms_per_call"],
           result["libvirtd_ms_per_domain"], result["qemu_ms_per_domain"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
