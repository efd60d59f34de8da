#!/usr/bin/python3
"""What a newly started guest holds of the host before plimsolld can first shrink it: the
measurement behind `line.new_guest_room_bytes` (docs/line.md).

Boots guests one at a time under a private libvirtd, with plimsolld running under the static
policy (it never moves a balloon, so what the guest holds is its own doing) and the packaged
configuration's stats settings (stats every 2 s, tick 5 s). Every 0.2 s it samples the guest's
QEMU RSS (`virsh dommemstat` rss: what the guest costs the host) and plimsolld's view of the
guest. The moment that matters is the first at which plimsolld could shrink the guest: listed,
managed, stats fresh. Per workload it reports the seconds from create to that moment, the RSS
then and the peak RSS up to it (MiB), as median and max over --boots.

  sudo python3 bench/new_guest_room.py --boots=3 --memory-mib=1024 --workloads=idle,stream \\
      --out=docs/bench/new_guest_room.json

The lab's guests boot a Debian kernel with a busybox initramfs: a distribution's userland
touches more at boot, so read the figures as a floor for such guests, exact for these.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

MIB = 1 << 20


def boot_once(lab, daemon, name, workload, memory_mib, timeout):
    """One boot: {"shrinkable_s", "rss_mib_then", "peak_rss_mib"}."""
    t0 = time.monotonic()
    lab.add_guest(name, workload=workload, memory_mib=memory_mib)
    peak = 0.0
    while True:
        now = time.monotonic() - t0
        if now > timeout:
            raise RuntimeError("%s: not shrinkable after %ss" % (name, timeout))
        try:
            rss = lab.dommemstat(name).get("rss", 0) / 1024.0
        except Exception:  # noqa: BLE001 - the domain may not answer in its first instants
            rss = 0.0
        peak = max(peak, rss)
        g = daemon.guests()[0].get(name)
        if g and g.get("management_state") == "MANAGEMENT_STATE_MANAGED" and g["stats"].get("stats_fresh"):
            return {"shrinkable_s": round(now, 1), "rss_mib_then": round(rss, 1), "peak_rss_mib": round(peak, 1)}
        time.sleep(0.2)


def summary(values):
    return {"median": round(statistics.median(values), 1), "max": round(max(values), 1),
            "min": round(min(values), 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--boots", type=int, default=3)
    ap.add_argument("--memory-mib", type=int, default=1024)
    ap.add_argument("--workloads", default="idle,stream")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--out")
    args = ap.parse_args()
    if harness.skip_reason():
        sys.exit("cannot run: %s" % harness.skip_reason())
    workdir = tempfile.mkdtemp(prefix="plimsoll-newroom-")
    lab = harness.labmod.Lab(state_dir=os.path.join(workdir, "lab"), workload_bin=harness.WORKLOAD)
    lab.start()
    daemon = harness.Daemon(workdir, lab.uri, tick="5s", stats_period_seconds=2, stale_after="30s",
                            policy="static", host_reserve_bytes=0)
    runs = {}
    try:
        for workload in args.workloads.split(","):
            runs[workload] = []
            for i in range(args.boots):
                name = "%s%d" % (workload, i)
                r = boot_once(lab, daemon, name, workload, args.memory_mib, args.timeout)
                print("%s: shrinkable %.1fs after create, RSS then %.0f MiB, peak %.0f MiB"
                      % (name, r["shrinkable_s"], r["rss_mib_then"], r["peak_rss_mib"]), flush=True)
                runs[workload].append(r)
                lab.virsh("destroy", name)
    finally:
        daemon.stop()
        lab.stop()
    result = {"memory_mib": args.memory_mib, "boots": args.boots, "stats_period_s": 2, "tick_s": 5,
              "workloads": {w: {"runs": rs,
                                "shrinkable_s": summary([r["shrinkable_s"] for r in rs]),
                                "rss_mib_then": summary([r["rss_mib_then"] for r in rs]),
                                "peak_rss_mib": summary([r["peak_rss_mib"] for r in rs])}
                            for w, rs in runs.items()}}
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
