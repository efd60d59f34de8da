#!/usr/bin/python3
"""The most any policy could reclaim on a real-guest lab run, and where each policy falls short.

Reads the JSON of bench/lab_policy_bench.py and, per repetition, bounds each guest's reclaimed
GiB*s from above with sizes no policy that keeps issue 14's promises (no OOM kill, every hot
guest within 5% of its unconstrained throughput) can go below:

  bound(t) = max(min, needed(t) + reserve, protected)
    min        plimsolld's default floor, max(256 MiB, 25% of the ceiling) (config.proto)
    needed(t)  what the guest held that is not page cache, in the same repetition's
               unconstrained run at the same time: M - MemFree - Cached from its heartbeats
               (M - MemTotal, the kernel's memory outside MemTotal, is in it). The anon guest's
               allocation appears here at the time it is made.
    reserve    --reserve-mib (default 0): free memory the guest's kernel keeps however hard it
               is squeezed (its watermarks; 58-79 MiB measured on these guests, docs/policy.md)
    protected  --protect guest=MiB: the largest size a hot guest was measured to collapse at
               (bench/size_cost.py, fixed sizes, no policy): it and every size below it cost
               far more than 5%. Without it a hot guest is bounded by needed(t) alone, which is
               far below its hot set.

The bound is generous on purpose: every guest is at its bound from t = 0 (balloons move
instantly, no policy needs a report to learn anything), a hot guest may sit just above the size
it collapses at, and by default the kernel's free-memory reserve is not counted. A target above
the bound is out of reach for every policy; one just under it asks a policy to be an oracle.

  python3 bench/lab_limit.py --protect=hot=268 docs/bench/trio.json

prints, per mix and agent mode, each guest's bound, each policy's reclaimed GiB*s (median over
the repetitions) and its share of the bound, and 1.5x MoM's as a share of the bound.
"""

import argparse
import gzip
import json
import statistics
import sys

MIB = 1 << 20
GIB = 1 << 30


def guest_min_mib(max_mib):
    return max(256.0, 0.25 * max_mib)


def needed_series(beats, max_mib):
    """[(t, MiB)]: the guest's memory that is not page cache, from an unconstrained run's
    heartbeats (t from the first heartbeat)."""
    if not beats:
        return []
    up0 = beats[0]["uptime"]
    return [(b["uptime"] - up0, max_mib - (b["memfree_kb"] + b["cached_kb"]) / 1024.0) for b in beats]


def at(series, t):
    """The series' value at t (the latest point at or before t; the first one before it)."""
    value = series[0][1]
    for when, v in series:
        if when > t:
            break
        value = v
    return value


def bound_gib_s(max_mib, series, protected_mib, seconds, reserve_mib=0.0, dt=0.5):
    """Reclaimed GiB*s of a guest held at its bound for `seconds`, and its bound at the end."""
    floor = max(guest_min_mib(max_mib), protected_mib or 0)
    total = 0.0
    t = 0.0
    size = max_mib
    while t < seconds:
        size = min(max_mib, max(floor, at(series, t) + reserve_mib if series else floor))
        total += (max_mib - size) * MIB * dt
        t += dt
    return total / GIB, size


def parse_protect(items):
    out = {}
    for item in items or []:
        name, sep, mib = item.partition("=")
        if not sep:
            raise SystemExit("--protect %r: expected guest=MiB" % item)
        try:
            out[name] = float(mib)
        except ValueError:
            raise SystemExit("--protect %r: %r is not a number of MiB" % (item, mib))
    return out


def median_range(values):
    if not values:
        return "-"
    return "%.1f (%.1f-%.1f)" % (statistics.median(values), min(values), max(values))


def analyse(runs, protect, out, reserve_mib=0.0, used=None):
    """Prints the tables of every (mix, agent mode) in `runs` and returns their summaries;
    adds to `used` the names of `protect` that are guests of an analysed mix."""
    groups = {}
    for r in runs:
        groups.setdefault((r["mix"], r["agent"]), []).append(r)
    summary = []
    for (mix, agent), group in sorted(groups.items()):
        static = {r["rep"]: r for r in group if r["policy"] == "static"}
        policies = sorted({r["policy"] for r in group if r["policy"] != "static"})
        if not static:
            print("%s agent=%s: no unconstrained (static) run to read the guests' needs from; skipped"
                  % (mix, agent), file=sys.stderr)
            continue
        guests = list(next(iter(static.values()))["guest_max_mib"])
        if used is not None:
            used.update(set(protect) & set(guests))
        bounds = {}  # rep -> guest -> GiB*s
        ends = {}
        for rep, s in static.items():
            bounds[rep], ends[rep] = {}, {}
            for g in guests:
                mx = s["guest_max_mib"][g]
                series = needed_series(s["guests"].get(g, {}).get("heartbeats", []), mx)
                bounds[rep][g], ends[rep][g] = bound_gib_s(mx, series, protect.get(g), s["seconds"],
                                                            reserve_mib)
        per_policy = {p: {g: [] for g in guests + ["total"]} for p in policies}
        ratio_to_mom = {p: [] for p in policies}
        for r in group:
            p = r["policy"]
            if p == "static" or r["rep"] not in bounds:
                continue
            for g in guests:
                per_policy[p][g].append(r["guests"].get(g, {}).get("reclaimed_gib_s", 0.0))
            per_policy[p]["total"].append(r["reclaimed_gib_s"])
        reps = sorted(bounds)
        bound_total = [sum(bounds[rep].values()) for rep in reps]
        print("\n%s, %s agent (%d repetitions; reserve %.0f MiB; bound: %s)" % (
            mix, "with the" if agent else "without the", len(reps), reserve_mib,
            ", ".join("%s >= %s" % (g, ("%.0f MiB" % protect[g]) if g in protect else "needed(t)")
                      for g in guests)), file=out)
        head = "| guest | bound GiB*s (end MiB) | " + " | ".join(policies) + " |"
        print(head, file=out)
        print("|" + "---|" * (2 + len(policies)), file=out)
        for g in guests + ["total"]:
            if g == "total":
                b = bound_total
                end = ""
            else:
                b = [bounds[rep][g] for rep in reps]
                end = " (%.0f)" % statistics.median(ends[rep][g] for rep in reps)
            cells = []
            for p in policies:
                v = per_policy[p][g]
                share = statistics.median(v) / statistics.median(b) if v and statistics.median(b) > 0 else 0
                cells.append("%s, %.2f of the bound" % (median_range(v), share))
            print("| %s | %s%s | %s |" % (g, median_range(b), end, " | ".join(cells)), file=out)
        if "mom" in per_policy and per_policy["mom"]["total"]:
            mom = statistics.median(per_policy["mom"]["total"])
            need = 1.5 * mom
            share = need / statistics.median(bound_total)
            print("1.5x MoM = %.1f GiB*s = %.2f of the bound" % (need, share), file=out)
            summary.append({"mix": mix, "agent": agent, "bound_gib_s": statistics.median(bound_total),
                            "mom_gib_s": mom, "target_share_of_bound": share,
                            "policies": {p: statistics.median(per_policy[p]["total"])
                                         for p in policies if per_policy[p]["total"]}})
    return summary


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+",
                    help="JSON written by bench/lab_policy_bench.py --out (.gz too)")
    ap.add_argument("--protect", action="append",
                    help="guest=MiB: the largest size that hot guest was measured to collapse at")
    ap.add_argument("--reserve-mib", type=float, default=0.0,
                    help="free memory a guest's kernel keeps, added to needed(t) (default 0)")
    ap.add_argument("--json", help="write the per-mix summary here")
    args = ap.parse_args(argv)
    protect = parse_protect(args.protect)
    summary = []
    used = set()
    # One file at a time: repetitions are numbered within a run of the benchmark, and each is
    # compared with its own unconstrained run.
    for f in args.files:
        with (gzip.open(f, "rt") if f.endswith(".gz") else open(f)) as fh:
            runs = json.load(fh)
        print("\n## %s" % f)
        for s in analyse(runs, protect, sys.stdout, args.reserve_mib, used):
            s["file"] = f
            summary.append(s)
    unused = set(protect) - used
    if unused:
        print("--protect names %s, a guest of no mix analysed" % ", ".join(sorted(unused)),
              file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summary, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
