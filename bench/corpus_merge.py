#!/usr/bin/python3
"""Merges corpus JSON files of one seed (`simulate --corpus --json`) run with different builds or
flags into one, each file's policies renamed TAG_policy, so that bench/corpus_compare.py can
score one against the other:

  simulate --corpus --seed=1 --count=50 --policies=pagecache --block_stats_interval=0 --json=a1.json
  simulate --corpus --seed=1 --count=50 --policies=pagecache --json=b1.json
  python3 bench/corpus_merge.py --out=m1.json every_tick=a1.json every_5s=b1.json
  python3 bench/corpus_compare.py --policy=every_5s_pagecache --against=every_tick_pagecache m1.json

The files must hold the same cases (same seed and count); the oracle's results come from the
first file, unrenamed, and every policy's oracle share is kept as its own file computed it.
"""

import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the merged JSON")
    ap.add_argument("inputs", nargs="+", help="TAG=FILE, one per build or flag set")
    args = ap.parse_args()
    merged = None
    for item in args.inputs:
        tag, sep, path = item.partition("=")
        if not sep or not tag or not path:
            sys.exit("corpus_merge: %r is not TAG=FILE" % item)
        with open(path) as f:
            run = json.load(f)
        if merged is None:
            merged = {k: v for k, v in run.items() if k != "scenarios"}
            merged["scenarios"] = [dict(c, results={"oracle": c["results"]["oracle"]}) for c in run["scenarios"]]
        names = [c["name"] for c in run["scenarios"]]
        if names != [c["name"] for c in merged["scenarios"]]:
            sys.exit("corpus_merge: %s holds other cases than the first file" % path)
        for case, into in zip(run["scenarios"], merged["scenarios"]):
            for policy, measures in case["results"].items():
                if policy != "oracle":
                    into["results"]["%s_%s" % (tag, policy)] = measures
    with open(args.out, "w") as f:
        json.dump(merged, f)


if __name__ == "__main__":
    main()
