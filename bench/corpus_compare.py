#!/usr/bin/env python3
"""Scores corpus runs from the JSON that `simulate --corpus --json=FILE` writes
(sim/corpus_report.h), one file per seed (.json, or .json.gz read as gzip). Two reports, either
or both:

The instruments (docs/instruments.md), for every policy in the files or those --policies names:

  python3 bench/corpus_compare.py --instruments /tmp/inst/seed*.json
  python3 bench/corpus_compare.py --instruments --policies=pagecache,pagecache_law,mom,limit \\
      --markdown docs/bench/instruments_seed10?.json

  (The recorded files in docs/bench/ name policies as they were run: there `pagecache_law` is
  the policy called `pagecache` here, and `pagecache` is the rule heap, deleted; its code and
  data are at commit 280c340.)

  per seed and policy, the median and the worst decile (the 10th percentile of
  safe_reclaim_share, the 90th of the harms) of
    safe       safe_reclaim_share: reclaim above the true working sets / the limit's
    kills      policy_kills: OOM kills while the guests' hard demand fits the host budget
    over s     over_budget_s: seconds over the host budget, likewise
    xstall s   excess_stall_s: stall beyond the limit's, guest by guest
    traffic    traffic_per_safe_gib_s, shown in MiB moved by the balloons per safe GiB*s (the
               JSON's GiB per GiB*s x 1024)
    rev/gh     reversals_per_guest_hour: direction changes of at least 2% of the guest's max
    returned   host_returned_share: the guests' ceilings less what they cost the host (their
               RSS: balloon sizes without in-guest reclaim, less the free pages reported with
               it), over the run, / the oracle's, which plays without in-guest reclaim (a run
               with `simulate --in_guest_reclaim`; "-" in files from before it)
    safe ret   safe_returned_share: safe reclaim with the guests at their RSS, / the limit's
    over rss s over_budget_rss_s: over_budget_s with the guests at their RSS
  then the policy's kills and the budget's own kills and over-budget seconds (infeasible time),
  and every kill by cause, summed over the seed's cases; and over the seeds, each figure's median across seeds
  with its range (min-max).

One policy against another (the targets in docs/benchmarks.md):

  python3 bench/corpus_compare.py --policy=pagecache --against=mom /tmp/corpus/seed*.json

  Per seed, over all cases (and the cache-heavy ones where the target is about them):
    reclaim    median reclaimed GiB*s, policy / against (ratio of the medians)
    stall      median stall s, policy / against
    oom        cases with any OOM kill, and the kills in all cases, for both
    traffic    median balloon traffic GiB, policy / against
    reversals  median reversals per guest-hour, policy / against (of at least 2% of the max in
               files that have reversals_any_per_guest_hour; every reversal in older files)
    oracle     median oracle share on the cache-heavy cases, for both
    x mom      median over the cache-heavy cases of reclaimed / MoM's reclaimed, and of stall -
               MoM's stall (negative: less stall than MoM)
  and the same split by agent / no agent (the agentless path is not an afterthought).

Either report on some cases only: --agent=on (the agent on every guest), off (on none: the
agentless cases; needs files with agent_guests, simulators since the balloon pressure counters),
mixed (on some but not all).

  python3 bench/corpus_compare.py --instruments --agent=off --policies=pagecache,mom,limit \\
      docs/bench/corpus_balloonpressure_seed?_on.json.gz
"""

import argparse
import gzip
import json
import math
import statistics
import sys

# (key in the JSON, column label, low is worse)
INSTRUMENTS = [
    ("safe_reclaim_share", "safe", True),
    ("policy_kills", "kills", False),
    ("over_budget_s", "over s", False),
    ("excess_stall_s", "xstall s", False),
    ("traffic_per_safe_gib_s", "traffic", False),
    ("reversals_per_guest_hour", "rev/gh", False),
    ("host_returned_share", "returned", True),
    ("safe_returned_share", "safe ret", True),
    ("over_budget_rss_s", "over rss s", False),
]


def load(path):
    """A corpus JSON file; a name ending in .gz is read as gzip."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def ratio(a, b):
    return a / b if b else float("nan")


def percentile(values, q):
    """The q-th percentile (0..100), linear between order statistics (numpy's default, and
    sim/corpus_report.h's); nan for no values."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return float("nan")
    pos = q / 100.0 * (len(values) - 1)
    lo = int(math.floor(pos))
    hi = min(len(values) - 1, lo + 1)
    return values[lo] + (pos - lo) * (values[hi] - values[lo])


def instrument_row(cases, policy):
    """{key: (median, worst decile)} for one policy over `cases`, plus the budget's kills and
    over-budget seconds, the policy's kills by cause, and how many cases had a value."""
    row = {}
    for key, _, low_is_worse in INSTRUMENTS:
        values = [c["results"][policy].get(key) for c in cases]
        row[key] = (percentile(values, 50), percentile(values, 10 if low_is_worse else 90))
    row["budget_kills"] = sum(c["results"][policy].get("budget_kills", 0) for c in cases)
    row["budget_over_budget_s"] = sum(c["results"][policy].get("budget_over_budget_s", 0) for c in cases)
    causes = {}
    for c in cases:
        for cause, n in c["results"][policy].get("kill_causes", {}).items():
            causes[cause] = causes.get(cause, 0) + n
    row["kill_causes"] = causes
    row["policy_kills_sum"] = sum(c["results"][policy].get("policy_kills", 0) for c in cases)
    row["cases"] = len(cases)
    return row


def fmt_value(key, v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if key in ("safe_reclaim_share", "host_returned_share", "safe_returned_share"):
        return "%.3f" % v
    if key == "traffic_per_safe_gib_s":
        return "%.2f" % (v * 1024)  # MiB per safe GiB*s
    if key == "policy_kills":
        return "%.1f" % v
    return "%.1f" % v


def fmt_causes(causes):
    return " ".join("%s=%d" % (k, causes[k]) for k in sorted(causes)) or "-"


def instruments_report(runs, policies, markdown):
    """Per seed and policy, then across seeds: the lines to print."""
    out = []
    per_seed = {}  # policy -> [row per seed]
    infeasible = []
    for run in runs:
        cases = run["scenarios"]
        secs = sum(c.get("duration_s", 0) for c in cases)
        inf = sum(c.get("infeasible_s", 0) for c in cases)
        n_inf = sum(1 for c in cases if c.get("infeasible_s", 0) > 0)
        infeasible.append((run["seed"], n_inf, len(cases), 100.0 * inf / secs if secs else float("nan")))
        out.append("seed %s: %d cases, %d with infeasible time (%.1f%% of all time)"
                   % (run["seed"], len(cases), n_inf, infeasible[-1][3]))
        for p in policies:
            row = instrument_row(cases, p)
            per_seed.setdefault(p, []).append(row)
            cells = "  ".join("%s %s / %s" % (label, fmt_value(key, row[key][0]), fmt_value(key, row[key][1]))
                              for key, label, _ in INSTRUMENTS)
            out.append("  %-14s %s  | kills: policy %d, budget %d | budget over %.0f s | kill causes: %s"
                       % (p, cells, row["policy_kills_sum"], row["budget_kills"], row["budget_over_budget_s"],
                          fmt_causes(row["kill_causes"])))
    out.append("")
    out.append("across %d seed(s): median of the per-seed figures [min-max]; median / worst decile" % len(runs))

    def spread(key, which, rows):
        vals = [r[key][which] for r in rows if not math.isnan(r[key][which])]
        if not vals:
            return "-"
        m = statistics.median(vals)
        if len(vals) == 1:
            return fmt_value(key, m)
        return "%s [%s-%s]" % (fmt_value(key, m), fmt_value(key, min(vals)), fmt_value(key, max(vals)))

    if markdown:
        head = "| policy | " + " | ".join("%s median" % label for _, label, _ in INSTRUMENTS) + " | " + \
               " | ".join("%s worst" % label for _, label, _ in INSTRUMENTS) + \
               " | policy kills | budget kills | kills by cause (all) |"
        out.append(head)
        out.append("|---|" + "---:|" * (2 * len(INSTRUMENTS) + 2) + "---|")
    for p in policies:
        rows = per_seed[p]
        causes = {}
        for r in rows:
            for k, n in r["kill_causes"].items():
                causes[k] = causes.get(k, 0) + n
        budget = sum(r["budget_kills"] for r in rows)
        policy_kills = sum(r["policy_kills_sum"] for r in rows)
        if markdown:
            out.append("| %s | %s | %s | %d | %d | %s |" % (
                p, " | ".join(spread(k, 0, rows) for k, _, _ in INSTRUMENTS),
                " | ".join(spread(k, 1, rows) for k, _, _ in INSTRUMENTS), policy_kills, budget,
                fmt_causes(causes)))
        else:
            out.append("  %-14s median: %s" % (p, "  ".join("%s %s" % (label, spread(k, 0, rows))
                                                               for k, label, _ in INSTRUMENTS)))
            out.append("  %-14s worst:  %s" % ("", "  ".join("%s %s" % (label, spread(k, 1, rows))
                                                            for k, label, _ in INSTRUMENTS)))
            out.append("  %-14s kills (all seeds): policy %d, budget %d; by cause: %s"
                       % ("", policy_kills, budget, fmt_causes(causes)))
    return out


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


def agent_filter(cases, which, path):
    """The cases --agent keeps: "on" every guest runs the agent, "off" none, "mixed" some; None
    or "" all cases. Exits when the file cannot tell (no agent_guests before the balloon pressure
    counters)."""
    if not which:
        return cases
    if which == "on":
        return [c for c in cases if c["agent"]]
    if any("agent_guests" not in c for c in cases):
        sys.exit("%s: no agent_guests (a run of a simulator before them): --agent=%s cannot tell"
                 % (path, which))
    if which == "off":
        return [c for c in cases if c["agent_guests"] == 0]
    return [c for c in cases if c["agent_guests"] > 0 and not c["agent"]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", help="with --against: the policy scored")
    ap.add_argument("--against", help="with --policy: the policy it is scored against")
    ap.add_argument("--mom", default="mom", help="the MoM baseline's name in the runs ('' for none)")
    ap.add_argument("--instruments", action="store_true",
                    help="print the instruments per seed and policy, and across seeds")
    ap.add_argument("--policies", default="",
                    help="with --instruments: comma-separated policies (default: every policy in the files)")
    ap.add_argument("--markdown", action="store_true",
                    help="with --instruments: the across-seeds summary as a Markdown table")
    ap.add_argument("--agent", choices=["on", "off", "mixed"], default="",
                    help="only the cases with the agent on every guest (on), on none (off), or on "
                         "some (mixed)")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    if bool(args.policy) != bool(args.against):
        ap.error("--policy and --against go together")
    if not args.policy and not args.instruments:
        ap.error("nothing to do: pass --instruments, or --policy and --against")
    runs = [load(path) for path in args.files]
    for path, run in zip(args.files, runs):
        run["scenarios"] = agent_filter(run["scenarios"], args.agent, path)
        if not run["scenarios"]:
            sys.exit("%s: no cases with --agent=%s" % (path, args.agent))
    if args.policy:
        for path, run in zip(args.files, runs):
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
    if args.instruments:
        policies = [p for p in args.policies.split(",") if p]
        if not policies:
            policies = list(runs[0]["scenarios"][0]["results"]) if runs[0]["scenarios"] else []
        for path, run in zip(args.files, runs):
            cases = run["scenarios"]
            for p in policies:
                if not cases or p not in cases[0]["results"]:
                    sys.exit("%s: no results for policy %r" % (path, p))
                if "safe_reclaim_share" not in cases[0]["results"][p]:
                    sys.exit("%s: no instruments (a run of a simulator before them)" % path)
        if args.policy:
            print()
        print("\n".join(instruments_report(runs, policies, args.markdown)))


if __name__ == "__main__":
    main()
