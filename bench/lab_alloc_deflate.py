#!/usr/bin/env python3
"""Whether a lab guest's allocation waited for a deflate: per run, per allocating guest.

For every guest of a `bench/lab_policy_bench.py` JSON whose workload allocated (`alloc` in its
record), prints how long the allocation took and how far its balloon grew (actual) from the
last sample before the allocation began to the highest in the 30 s after: 0 means the memory
was there already (no deflate was waited for), more is a deflate the allocation needed.

    python3 bench/lab_alloc_deflate.py docs/bench/coldcache_brake_3reps.json.gz
"""

import argparse
import gzip
import json
import sys

WINDOW_S = 30.0


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def balloon_growth_mib(run, guest, start_t):
    """The balloon's growth in the window after start_t, or None without samples around it."""
    before = [s[guest] for s in run["samples"] if start_t - 5 <= s["t"] <= start_t and guest in s]
    after = [s[guest] for s in run["samples"] if start_t < s["t"] <= start_t + WINDOW_S and guest in s]
    if not before or not after:
        return None
    return max(0.0, (max(after) - before[-1]) / 2**20)


def rows(runs):
    for run in runs:
        for guest, rec in run["guests"].items():
            alloc = rec.get("alloc")
            if not alloc:
                continue
            yield (run["policy"], run.get("rep", 0), guest, alloc.get("seconds"),
                   balloon_growth_mib(run, guest, alloc["start_t"]))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="lab_policy_bench.py JSON files (.json or .json.gz)")
    args = ap.parse_args(argv)
    print("| file | policy | rep | guest | allocation s | balloon grown MiB (30 s) |")
    print("|---|---|---:|---|---:|---:|")
    for path in args.files:
        for policy, rep, guest, seconds, grown in rows(load(path)):
            print("| %s | %s | %d | %s | %s | %s |" % (
                path.rsplit("/", 1)[-1], policy, rep, guest,
                "-" if seconds is None else "%.1f" % seconds,
                "-" if grown is None else "%.0f" % grown))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
