#!/usr/bin/env python3
"""Scores one policy against another on corpus runs (the targets in docs/benchmarks.md), from the JSON that
`simulate --corpus --json=FILE` writes (sim/corpus_report.h), one file per seed.

  python3 bench/corpus_compare.py --policy=pagecache_law --against=pagecache /tmp/law/seed*.json

Per seed, over all cases (and the cache-heavy ones where the target is about them):
  reclaim    median reclaimed GiB*s, policy / against (ratio of the medians)
  stall      median stall s, policy / against
  oom        cases with any OOM kill, and the kills in all cases, for both
  traffic    median balloon traffic GiB, policy / against
  reversals  median reversals per guest-hour, policy / against
  oracle     median oracle share on the cache-heavy cases, for both
  x mom      median over the cache-heavy cases of reclaimed / MoM's reclaimed, and of stall - MoM's
             stall (negative: less stall than MoM)
and the same split by agent / no agent (the agentless path is not an afterthought).
"""

import argparse
import json
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def ratio(a, b):
    return a / b if b else float("nan")


def score(cases, p, q, mom):
    def col(policy, key, sub=None):
        return [c["results"][policy].get(key) for c in (sub if sub is not None else cases)]

    heavy = [c for c in cases if c["cache_heavy"]]
    row = {
        "cases": len(cases),
        "reclaim": ratio(med(col(p, "reclaimed_gib_s")), med(col(q, "reclaimed_gib_s"))),
        "stall": ratio(med(col(p, "stall_s")), med(col(q, "stall_s"))),
        "oom_cases": (sum(1 for v in col(p, "oom_kills") if v), sum(1 for v in col(q, "oom_kills") if v)),
        "oom_kills": (sum(col(p, "oom_kills")), sum(col(q, "oom_kills"))),
        # Cases where even the oracle (sim/oracle_policy.h) kills: the scenario forces it.
        "oom_oracle": (sum(1 for v in col("oracle", "oom_kills") if v)
                       if cases and "oracle" in cases[0]["results"] else None),
        "traffic": ratio(med(col(p, "traffic_gib")), med(col(q, "traffic_gib"))),
        "reversals": ratio(med(col(p, "reversals_per_guest_hour")), med(col(q, "reversals_per_guest_hour"))),
        "oracle_heavy": (med(col(p, "oracle_share", heavy)), med(col(q, "oracle_share", heavy))),
    }
    if mom and heavy and mom in heavy[0]["results"]:
        row["x_mom_heavy"] = med([ratio(c["results"][p]["reclaimed_gib_s"], c["results"][mom]["reclaimed_gib_s"])
                                  for c in heavy])
        row["stall_minus_mom_heavy"] = med([c["results"][p]["stall_s"] - c["results"][mom]["stall_s"] for c in heavy])
    return row


def fmt(row):
    out = "%4d cases  reclaim %.3fx  stall %.3fx  traffic %.3fx  reversals %.3fx  oracle(heavy) %.3f vs %.3f  OOM cases %d vs %d (kills %d vs %d)" % (
        row["cases"], row["reclaim"], row["stall"], row["traffic"], row["reversals"],
        row["oracle_heavy"][0], row["oracle_heavy"][1], row["oom_cases"][0], row["oom_cases"][1],
        row["oom_kills"][0], row["oom_kills"][1])
    if row["oom_oracle"] is not None:
        out += " [oracle %d]" % row["oom_oracle"]
    if "x_mom_heavy" in row:
        out += "  x MoM(heavy) %.3f  stall-MoM(heavy) %+.1f s" % (row["x_mom_heavy"], row["stall_minus_mom_heavy"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", required=True)
    ap.add_argument("--against", required=True)
    ap.add_argument("--mom", default="mom", help="the MoM baseline's name in the runs ('' for none)")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    for path in args.files:
        run = load(path)
        cases = run["scenarios"]
        for name in (args.policy, args.against):
            if not cases or name not in cases[0]["results"]:
                sys.exit("%s: no results for policy %r" % (path, name))
        mom = args.mom if args.mom and args.mom in cases[0]["results"] else None
        print("seed %s  all      %s" % (run["seed"], fmt(score(cases, args.policy, args.against, mom))))
        for label, keep in (("agent", True), ("no agent", False)):
            sub = [c for c in cases if c["agent"] == keep]
            if sub:
                print("seed %s  %-8s %s" % (run["seed"], label, fmt(score(sub, args.policy, args.against, mom))))


if __name__ == "__main__":
    main()
