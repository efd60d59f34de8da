#!/usr/bin/env python3
"""How steadily the lab's streaming guests read from disk: the simulator's read_drift.

Reads the disk-read rates plimsolld logged in its decisions (`disk=...MiB/s`, one per
block_stats_interval) for each guest whose name contains --guest (default "stream") in runs
without the agent, and prints what sim/guest_model.cc's read_drift is fitted to:

  - the first reading against the run's median (readers that start beside their neighbours
    read slowly at first),
  - the standard deviation of log(reading / median) over the readings after the second,
  - the lag-one correlation of those logs (how slowly the pace wanders).

    python3 bench/read_drift.py /tmp/logs/plimsolld-*-noagent-pagecache-rep*.log --save=reads.json
    python3 bench/read_drift.py docs/bench/stream_disk_reads.json.gz

A saved file (JSON, gzip when its name ends in .gz) holds the series only, and reads back the
same. Results: docs/policy.md "Calibration against real guests".
"""
import argparse
import gzip
import json
import math
import re
import statistics
import sys

DECISION = re.compile(r" decision tick=(\d+) guest=(\S+) .*? actual=([0-9.]+)MiB .*?disk=([0-9.]+)(MiB|KiB|B)/s")
UNIT = {"MiB": 1.0, "KiB": 1 / 1024, "B": 1 / 2**20}


def series_from_log(path, guest):
    """{guest: [(tick, actual MiB, disk MiB/s)]}, one entry per new reading (the log repeats a
    reading on every tick until the next one)."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = DECISION.search(line)
            if not m or guest not in m.group(2):
                continue
            tick, name, actual, value, unit = m.groups()
            rate = float(value) * UNIT[unit]
            s = out.setdefault(name, [])
            if not s or abs(rate - s[-1][2]) > 1e-9:
                s.append((int(tick), float(actual), rate))
    return out


def load(paths, guest):
    runs = []
    for path in paths:
        if path.endswith(".json") or path.endswith(".json.gz"):
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt") as f:
                runs.extend(json.load(f)["runs"])
            continue
        for name, s in sorted(series_from_log(path, guest).items()):
            runs.append({"log": path.rsplit("/", 1)[-1], "guest": name, "readings": s})
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="plimsolld logs, or a file --save wrote")
    ap.add_argument("--guest", default="stream", help="guests whose name contains this")
    ap.add_argument("--save", help="write the series here (JSON; gzip if it ends in .gz)")
    args = ap.parse_args()
    runs = [r for r in load(args.inputs, args.guest) if len(r["readings"]) >= 6]
    if not runs:
        sys.exit("no run with six or more disk readings of a guest named like %r" % args.guest)
    firsts, devs, pairs = [], [], []
    for r in runs:
        rates = [x[2] for x in r["readings"]]
        median = statistics.median(rates[2:])
        firsts.append(rates[0] / median)
        logs = [math.log(x / median) for x in rates[2:] if x > 0]
        devs += logs
        pairs += list(zip(logs, logs[1:]))
    print("runs: %d, readings after the second: %d" % (len(runs), len(devs)))
    print("first reading / median: median %.2f, range %.2f..%.2f, %d of %d under 0.8" % (
        statistics.median(firsts), min(firsts), max(firsts), sum(f < 0.8 for f in firsts), len(firsts)))
    print("sd of log(reading / median): %.3f" % statistics.pstdev(devs))
    print("lag-one correlation: %.2f" % statistics.correlation([a for a, _ in pairs], [b for _, b in pairs]))
    if args.save:
        opener = gzip.open if args.save.endswith(".gz") else open
        with opener(args.save, "wt") as f:
            json.dump({"runs": runs}, f)
        print("saved: %s" % args.save)


if __name__ == "__main__":
    main()
