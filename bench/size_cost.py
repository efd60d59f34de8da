#!/usr/bin/python3
"""What a balloon size costs a real guest's workload, with no policy in the loop.

Boots a lab mix (bench/lab_policy_bench.py's MIXES) under a private libvirtd, no plimsolld, and
cycles through phases; each phase sets every guest's balloon to a fixed size (`virsh setmem`),
waits for the balloons to land and for a settle time, then measures for the rest of the phase:
each reader's MB/s (the workload's own lines), file refaults and PSI stall seconds (the guest's
heartbeats). The phases repeat --cycles times in the same order (A B A B ...), so a drift of the
machine during the run falls on every phase alike; per phase the report gives the median over
cycles and the range.

Why: a policy's result on a mix mixes two costs, the size it chose and the moves it made to get
there. This measures the first alone, e.g. whether the trio's hot guest (128 MiB hot file) runs
slower at 350 MiB than at 1024 MiB when its pressure signals say nothing:

  sudo python3 bench/size_cost.py --mix=trio --phase=all=max --phase=hot=350 --phase=hot=300 \\
      --cycles=3 --phase-seconds=40

A phase is `all=max` (every guest at its ceiling) or comma-separated `guest=MiB` (guests not
named are at their ceiling).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
import lab_policy_bench  # noqa: E402  (the mixes, and the harness on sys.path)
import harness  # noqa: E402


def parse_phase(text, maxes):
    """{guest: MiB} for every guest of the mix; ValueError naming what is wrong."""
    sizes = dict(maxes)
    if text == "all=max":
        return sizes
    for part in text.split(","):
        name, sep, mib = part.partition("=")
        if not sep or name not in maxes:
            raise ValueError("phase %r: %r is not guest=MiB for a guest of the mix (%s)"
                             % (text, part, ", ".join(sorted(maxes))))
        value = maxes[name] if mib == "max" else int(mib)
        if not 64 <= value <= maxes[name]:
            raise ValueError("phase %r: %s=%s is outside 64..%d MiB" % (text, name, mib, maxes[name]))
        sizes[name] = value
    return sizes


def uptime(lab, name):
    return lab.heartbeat(name)["uptime"]


def measure(lab, names, since):
    """{guest: {"mbps", "refaults", "stall_s"}} over heartbeats and workload lines after `since`
    (each guest's uptime when the measurement began)."""
    out = {}
    for n in names:
        beats = [b for b in lab.heartbeats(n) if b["uptime"] >= since[n]]
        lines = [w["mbps"] for w in lab.workload_lines(n) if "mbps" in w and w.get("t", 0) >= since[n]]
        row = {"mbps": statistics.mean(lines) if lines else None}
        if len(beats) >= 2:
            a, b = beats[0], beats[-1]
            row["refaults"] = b["workingset_refault_file"] - a["workingset_refault_file"]
            row["stall_s"] = (max(0, b["psi_some_total_us"] - a["psi_some_total_us"]) / 1e6
                              if a.get("psi_some_total_us", -1) >= 0 else None)
            row["seconds"] = b["uptime"] - a["uptime"]
        out[n] = row
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mix", default="trio", choices=sorted(lab_policy_bench.MIXES))
    ap.add_argument("--phase", action="append", required=True, help="all=max, or guest=MiB[,guest=MiB]")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--phase-seconds", type=float, default=40)
    ap.add_argument("--settle-seconds", type=float, default=10,
                    help="after the balloons land, before measuring (the cache refills or drains)")
    ap.add_argument("--stream-mib", type=int, default=1536)
    ap.add_argument("--anon-mib", type=int, default=300)
    ap.add_argument("--anon-after", type=int, default=60)
    ap.add_argument("--out", help="JSON of every phase measured")
    args = ap.parse_args()

    guests = lab_policy_bench.mix_guests(args.mix, args)
    maxes = {name: mx // harness.MIB for name, _, mx in guests}
    try:
        phases = [(p, parse_phase(p, maxes)) for p in args.phase]
    except ValueError as e:
        ap.error(str(e))
    problem = harness.skip_reason()
    if problem:
        print("cannot run a lab: %s" % problem, file=sys.stderr)
        return 2

    workdir = tempfile.mkdtemp(prefix="plimsoll-size-cost-")
    lab = harness.labmod.Lab(state_dir=os.path.join(workdir, "lab"), workload_bin=harness.WORKLOAD,
                             stream_mib=args.stream_mib, hot_mib=lab_policy_bench.mix_hot_mib(args.mix))
    names = [g[0] for g in guests]
    results = []
    try:
        lab.start()
        for name, kw, _ in guests:
            lab.add_guest(name, **kw)
        for name in names:
            lab.wait_ready(name, timeout=120)
        for cycle in range(args.cycles):
            for label, sizes in phases:
                t0 = time.monotonic()
                for n in names:
                    lab.setmem(n, sizes[n])
                for n in names:
                    lab.wait_actual(n, sizes[n], tolerance=0.03, timeout=max(30, args.phase_seconds))
                landed_s = time.monotonic() - t0
                time.sleep(args.settle_seconds)
                since = {n: uptime(lab, n) for n in names}
                time.sleep(max(0, args.phase_seconds - (time.monotonic() - t0)))
                row = {"cycle": cycle, "phase": label, "sizes_mib": sizes, "landed_s": landed_s,
                       "guests": measure(lab, names, since)}
                results.append(row)
                print(json.dumps(row), flush=True)
    finally:
        lab.stop()

    if args.out:
        with open(args.out, "w") as f:
            json.dump({"mix": args.mix, "args": vars(args), "phases": results}, f, indent=1)
    print("\n%s, %d cycle(s), %.0f s phases (%.0f s settle): median (min..max) over cycles"
          % (args.mix, args.cycles, args.phase_seconds, args.settle_seconds))
    print("| phase | " + " | ".join("%s MB/s | %s refaults | %s stall s" % (n, n, n) for n in names) + " |")
    print("|---" * (1 + 3 * len(names)) + "|")
    for label, _ in phases:
        rows = [r for r in results if r["phase"] == label]
        cells = []
        for n in names:
            for key, fmt in (("mbps", "%.0f"), ("refaults", "%.0f"), ("stall_s", "%.1f")):
                vals = [r["guests"][n].get(key) for r in rows if r["guests"][n].get(key) is not None]
                cells.append("%s (%s..%s)" % (fmt % statistics.median(vals), fmt % min(vals), fmt % max(vals))
                             if vals else "-")
        print("| %s | %s |" % (label, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
