#!/usr/bin/python3
"""What reading a guest's balloon pressure counters costs: one QEMU monitor command per guest
per stats period (server/loop/balloon_pressure_reader.h).

Boots one idle guest of the lab's backports flavour (6.12 on QEMU 10.0), then sends N
qom-get guest-stats commands through libvirt, as plimsolld does, and N `domstats --balloon`
calls beside (what a tick's stats read costs), each batch from one virsh process. Reports per call: the wall time
beyond domstats', and the CPU time QEMU and libvirtd spent (from /proc/<pid>/stat, so the
machine's other load does not count). Needs root (the lab).

  python3 bench/balloon_pressure_cost.py [--calls=200] [--json=FILE]
"""

import argparse
import json
import sys
import time

from guest_lab import cpu_seconds, labmod

QUERY = ('{"execute":"qom-get","arguments":{"path":"/machine/peripheral/balloon0",'
         '"property":"guest-stats"}}')


def measure(lab, calls, command, qemu_pid, libvirtd_pid):
    """Runs `command` `calls` times in one virsh process (its start-up counted once)."""
    batch = "; ".join([command] * calls)
    q0, l0, t0 = cpu_seconds(qemu_pid), cpu_seconds(libvirtd_pid), time.monotonic()
    lab.virsh(batch, timeout=600)
    return ((time.monotonic() - t0) / calls, (cpu_seconds(qemu_pid) - q0) / calls,
            (cpu_seconds(libvirtd_pid) - l0) / calls)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    with labmod.Lab() as lab:
        lab.start()
        lab.add_guest("g", workload="idle", memory_mib=1024, agent_channel=False, flavour="backports")
        lab.wait_ready("g", timeout=120)
        time.sleep(3)
        qemu = labmod.lab_qemu_pids(lab.state_dir)[0]
        libvirtd = lab.libvirtd_pid()
        base = measure(lab, args.calls, "domstats --balloon g", qemu, libvirtd)
        mon = measure(lab, args.calls, "qemu-monitor-command g '%s'" % QUERY, qemu, libvirtd)
    out = {
        "calls": args.calls,
                "monitor_wall_ms": round(mon[0] * 1e3, 3),
        "domstats_wall_ms": round(base[0] * 1e3, 3),
        "qemu_cpu_ms_per_monitor_call": round(mon[1] * 1e3, 3),
        "qemu_cpu_ms_per_domstats_call": round(base[1] * 1e3, 3),
        "libvirtd_cpu_ms_per_monitor_call": round(mon[2] * 1e3, 3),
        "libvirtd_cpu_ms_per_domstats_call": round(base[2] * 1e3, 3),
    }
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
