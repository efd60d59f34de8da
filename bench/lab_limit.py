#!/usr/bin/python3
"""The most any policy could reclaim on a real-guest lab run, and where each policy falls short.

Reads the JSON of bench/lab_policy_bench.py and bounds each guest's reclaimed GiB*s from above
with sizes no policy run in that lab can go below without breaking the real-guest targets (no OOM
kill, every hot guest within 5% of its unconstrained throughput) or plimsolld's floor:

  bound(t) = max(min, needed(t) + reserve, collapse)
    min        plimsolld's default floor, max(256 MiB, 25% of the ceiling) (config.proto), which
               every policy in the lab runs under; --no-floor leaves it out (then the stream
               guest, which needs ~105 MiB, sets the bound far lower)
    needed(t)  what the guest held that was not page cache, in the same repetition's
               unconstrained run at the same time: M - MemFree - Cached from its heartbeats
               (M - MemTotal, the kernel's memory outside MemTotal, is in it; Shmem, in Cached,
               is not, which only makes the bound more generous). The anon guest's allocation
               appears here within about 3 s of when the measured run made it (both count from
               their own start; the allocation counts from the guest's boot).
    reserve    --reserve-mib (default 0): free memory a squeezed guest's kernel keeps (its
               watermarks: 58 / 79 MiB measured on the 768 / 1536 MiB calibration guests,
               docs/policy.md)
    collapse   --protect guest=MiB: the largest size a hot guest was measured to collapse at
               (bench/size_cost.py, fixed sizes, no policy): it and every size below it cost
               far more than 5%. Without it a hot guest is bounded by needed(t) alone, which is
               far below its hot set.

Each run is held against the bound integrated the way the bench integrates it: over that run's
own samples, 2 s each (the sampling loop takes ~2.1 s a round, so a 150 s run has 69-73 samples),
so a run sitting at the bound at every sample scores exactly 1.0 of it.

The bound is generous on purpose: balloons move instantly, no policy waits for a report, the anon
guest's allocation is met the moment it is made, and a hot guest sits just above the size where
it collapses. No policy reaches it; a target close to it asks a policy to be an oracle.

Beside it, the reactive ceiling: what a policy that only reacts could reach on the same run. It
sees each guest's demand one report period P late, keeps no headroom beyond the kernel's reserve,
and cannot take memory the guest is using, nor memory freed less than P ago:

  ceiling(t) = max(min, max(needed(t), needed(t - P)) + kreserve, collapse)
    P          --period-s (default 2 s: the bench's tick and agent interval): a fall in demand
               is taken P after it happened; a rise is held from the moment it is made (the
               guest's allocation deflates its balloon; the policy could not have taken that
               memory before it saw the allocation, nor can it take it while it is in use)
    kreserve   the guest's kernel reserve by its size, a line through the two measured points
               (58 MiB at 768 MiB, 79 MiB at 1536; bench/lab_mix_gen.py kernel_reserve_mib);
               --reactive-reserve-mib sets one figure for every guest

It is still generous (balloons move instantly, an allocation costs no stall, a hot guest sits
just above its collapse) and it is at most the bound whenever --reserve-mib is at most kreserve.

--burst-window-s W > 0 gives the reactive ceiling burst room: a reactive policy that keeps room
for a repeat of the largest rise in demand it has seen over one period within the last W seconds
(the law's burst_headroom, docs/policy.md; the law's window is 600 s):

  ceiling(t) = max(min, max(needed(t), needed(t - P)) + kreserve + burst(t), collapse)
    burst(t)   max over t - W < t' <= t of needed(t') - needed(t' - P), at least 0

Runs with QEMU RSS samples (host returned GiB*s (RSS), in-guest reclaim) are also held against
the host-returned reactive ceiling: at each sample, what the unconstrained guest held in use
(M - MemFree, cache included) above the reactive ceiling's size. Free memory counts nothing there:
free page reporting returns it under every policy, so only cache a policy takes shows in the RSS.

A generated mix's hot guest (--mix=gen:SEED; its description is in the JSON) that --protect does
not name is protected at its hot set + 140 MiB (estimated: the measured collapse sizes sit 140-152
MiB above the hot set, bench/size_cost.py: 280 MiB for 128, 268 for 128, 530 for 384).

  cd docs/bench && python3 ../../bench/lab_limit.py --protect=hot=280 trio_agent_law_vs_mom.json.gz

prints, per mix and agent mode, each guest's bound and reactive ceiling, each policy's reclaimed
GiB*s and its share of both (medians over the repetitions, with ranges), and 1.5x MoM's share.
"""

import argparse
import gzip
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lab_mix_gen import kernel_reserve_mib  # noqa: E402
from lab_policy_bench import median_range  # noqa: E402  (the bench's own table format)

# A generated mix's hot guest without --protect: its hot set plus this (see the docstring).
HOT_COLLAPSE_GAP_MIB = 140.0
DEFAULT_PERIOD_S = 2.0


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


def bound_mib(max_mib, series, collapse_mib, t, reserve_mib=0.0, floor=True):
    """The guest's bound at t (MiB)."""
    lowest = max(guest_min_mib(max_mib) if floor else 0.0, collapse_mib or 0.0)
    if series:
        lowest = max(lowest, at(series, t) + reserve_mib)
    return min(max_mib, lowest)


def bound_gib_s(max_mib, series, collapse_mib, sample_times, reserve_mib=0.0, floor=True, dt=2.0):
    """Reclaimed GiB*s of a guest held at its bound, integrated as the bench integrates a run:
    each of its samples (times from the run's start) counts dt seconds."""
    return sum((max_mib - bound_mib(max_mib, series, collapse_mib, t, reserve_mib, floor)) * dt
               for t in sample_times) / 1024.0


def burst_room_mib(series, t, period_s, window_s):
    """The largest rise of the series over one period_s ending within (t - window_s, t] (MiB, at
    least 0); 0 when window_s <= 0."""
    if window_s <= 0 or not series:
        return 0.0
    rises = [at(series, when) - at(series, when - period_s) for when, _ in series if t - window_s < when <= t]
    return max([0.0] + rises)


def reactive_mib(max_mib, series, collapse_mib, t, period_s, reserve_mib, floor=True, burst_window_s=0.0):
    """The reactive ceiling's size for the guest at t (MiB): the demand it holds now or held
    period_s ago (whichever is larger) plus the kernel's reserve and, with burst_window_s > 0,
    the burst room; the floor, the collapse."""
    lowest = max(guest_min_mib(max_mib) if floor else 0.0, collapse_mib or 0.0)
    if series:
        lowest = max(lowest, max(at(series, t), at(series, t - period_s)) + reserve_mib
                     + burst_room_mib(series, t, period_s, burst_window_s))
    return min(max_mib, lowest)


def reactive_gib_s(max_mib, series, collapse_mib, sample_times, period_s, reserve_mib, floor=True,
                   dt=2.0, burst_window_s=0.0):
    """Reclaimed GiB*s of a guest held at its reactive ceiling, integrated as bound_gib_s is."""
    return sum((max_mib - reactive_mib(max_mib, series, collapse_mib, t, period_s, reserve_mib, floor,
                                       burst_window_s))
               * dt for t in sample_times) / 1024.0


def used_series(beats, max_mib):
    """[(t, MiB)]: what the guest held in use, cache included (M - MemFree), from an
    unconstrained run's heartbeats, as needed_series counts."""
    if not beats:
        return []
    up0 = beats[0]["uptime"]
    return [(b["uptime"] - up0, max_mib - b["memfree_kb"] / 1024.0) for b in beats]


def reactive_rss_gib_s(max_mib, needed, used, collapse_mib, sample_times, period_s, reserve_mib,
                       floor=True, dt=2.0, burst_window_s=0.0):
    """The most host memory (QEMU RSS) a reactive policy could return from the guest: what the
    unconstrained guest held in use above its reactive ceiling's size, at each sample. Memory the
    guest holds free is not counted: free page reporting returns it under every policy, so only
    the cache a policy takes (by balloon or in-guest reclaim) shows in the RSS."""
    if not used:
        return 0.0
    return sum(max(0.0, at(used, t) - reactive_mib(max_mib, needed, collapse_mib, t, period_s, reserve_mib,
                                                   floor, burst_window_s)) * dt for t in sample_times) / 1024.0


def generated_protect(run):
    """{hot guest: estimated collapse MiB} of a generated mix's run (none for the named mixes)."""
    desc = run.get("mix_desc") or {}
    return {g["name"]: g["hot_mib"] + HOT_COLLAPSE_GAP_MIB
            for g in desc.get("guests", []) if g.get("kind") == "hot" and g.get("hot_mib")}


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


def analyse(runs, protect, out, reserve_mib=0.0, used=None, floor=True, period_s=DEFAULT_PERIOD_S,
            reactive_reserve_mib=None, burst_window_s=0.0):
    """Prints the tables of every (mix, agent mode) in `runs` and returns their summaries;
    adds to `used` the names of `protect` that are guests of an analysed mix.
    reactive_reserve_mib: the reactive ceiling's reserve for every guest; None: by guest size.
    burst_window_s > 0: the reactive ceiling keeps burst room (burst_room_mib)."""
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
        estimated = {g: mib for g, mib in generated_protect(group[0]).items() if g not in protect}
        guard = dict(estimated, **{g: mib for g, mib in protect.items() if g in guests})
        series = {}  # rep -> guest -> needed(t)
        for rep, s in static.items():
            series[rep] = {}
            for g in guests:
                beats = s["guests"].get(g, {}).get("heartbeats", [])
                if not beats:
                    print("%s agent=%s rep %d: %s has no heartbeats in the unconstrained run: its "
                          "bound is its floor alone" % (mix, agent, rep, g), file=sys.stderr)
                series[rep][g] = needed_series(beats, s["guest_max_mib"][g])

        def kres(g, max_mib):
            return kernel_reserve_mib(max_mib) if reactive_reserve_mib is None else reactive_reserve_mib

        def limits_of(r):
            """({guest: GiB*s, "total": ...} of the bound, the same of the reactive ceiling), on
            run r's own samples."""
            times = [row["t"] for row in r["samples"]]
            b, c = {}, {}
            for g in guests:
                mx = r["guest_max_mib"][g]
                b[g] = bound_gib_s(mx, series[r["rep"]][g], guard.get(g), times, reserve_mib, floor)
                c[g] = reactive_gib_s(mx, series[r["rep"]][g], guard.get(g), times, period_s,
                                      kres(g, mx), floor, burst_window_s=burst_window_s)
            b["total"] = sum(b.values())
            c["total"] = sum(c.values())
            return b, c

        # policy -> guest -> [(reclaimed, bound, ceiling) on the same run's samples]
        per_policy = {p: {g: [] for g in guests + ["total"]} for p in policies + ["static"]}
        for r in group:
            if r["rep"] not in series:
                continue
            b, c = limits_of(r)
            for g in guests:
                got = r["guests"].get(g, {}).get("reclaimed_gib_s")
                if got is None:
                    print("%s agent=%s rep %d %s: no reclaimed_gib_s for %s (guest died?): counted 0"
                          % (mix, agent, r["rep"], r["policy"], g), file=sys.stderr)
                    got = 0.0
                per_policy[r["policy"]][g].append((got, b[g], c[g]))
            per_policy[r["policy"]]["total"].append((r["reclaimed_gib_s"], b["total"], c["total"]))
        reps = sorted(series)
        print("\n%s, %s agent (%d repetitions; reserve %.0f MiB; %s; bound: %s; reactive ceiling: "
              "period %g s, kernel reserve %s%s)" % (
                  mix, "with the" if agent else "without the", len(reps), reserve_mib,
                  "plimsolld's floor" if floor else "no floor",
                  ", ".join("%s >= %s" % (g, ("%.0f MiB%s" % (guard[g], " (estimated)" if g in estimated
                                                                   else "")) if g in guard else "needed(t)")
                            for g in guests),
                  period_s, "by guest size" if reactive_reserve_mib is None
                  else "%.0f MiB" % reactive_reserve_mib,
                  ", burst room over %g s" % burst_window_s if burst_window_s > 0 else ""), file=out)
        print("| guest | bound GiB*s | reactive ceiling GiB*s (share of the bound) | "
              + " | ".join("%s: GiB*s, share of bound / of ceiling" % p for p in policies) + " |", file=out)
        print("|" + "---|" * (3 + len(policies)), file=out)
        shares = {}
        for g in guests + ["total"]:
            cells = []
            for p in policies:
                trip = per_policy[p][g]
                sb = [got / b for got, b, _ in trip if b > 0]
                sc = [got / c for got, _, c in trip if c > 0]
                shares[(p, g)] = (statistics.median(sb) if sb else None,
                                  statistics.median(sc) if sc else None)
                cells.append("%s, %s / %s" % (
                    median_range([got for got, _, _ in trip]),
                    ("%.2f" % shares[(p, g)][0]) if sb else "-",
                    ("%.2f" % shares[(p, g)][1]) if sc else "-"))
            base = per_policy["static"][g]
            cb = [c / b for _, b, c in base if b > 0]
            print("| %s | %s | %s (%s) | %s |" % (
                g, median_range([b for _, b, _ in base]), median_range([c for _, _, c in base]),
                ("%.2f" % statistics.median(cb)) if cb else "-", " | ".join(cells)), file=out)
        moms = per_policy.get("mom", {}).get("total", [])
        entry = {"mix": mix, "agent": agent,
                 "bound_gib_s": statistics.median(b for _, b, _ in per_policy["static"]["total"]),
                 "ceiling_gib_s": statistics.median(c for _, _, c in per_policy["static"]["total"]),
                 "period_s": period_s, "burst_window_s": burst_window_s,
                 "policies": {p: {"gib_s": statistics.median(got for got, _, _ in per_policy[p]["total"]),
                                  "share_of_bound": shares[(p, "total")][0],
                                  "share_of_ceiling": shares[(p, "total")][1]}
                              for p in policies if per_policy[p]["total"]}}
        if moms:
            need = statistics.median(1.5 * got for got, _, _ in moms)
            share = statistics.median(1.5 * got / b for got, b, _ in moms if b > 0)
            share_c = statistics.median(1.5 * got / c for got, _, c in moms if c > 0)
            print("1.5x MoM = %.1f GiB*s = %.2f of the bound, %.2f of the reactive ceiling (on MoM's "
                  "own samples)" % (need, share, share_c), file=out)
            entry.update(mom_gib_s=statistics.median(got for got, _, _ in moms),
                         target_share_of_bound=share, target_share_of_ceiling=share_c)
        rss_lines = rss_ceiling_lines(group, static, guests, guard, policies, period_s, floor, kres,
                                      burst_window_s)
        if rss_lines:
            for line in rss_lines["lines"]:
                print(line, file=out)
            entry["rss"] = rss_lines["summary"]
        summary.append(entry)
    return summary


def rss_ceiling_lines(group, static, guests, guard, policies, period_s, floor, kres, burst_window_s=0.0):
    """The host-returned (RSS) reactive ceiling of each run with RSS samples and each policy's
    share of it (host_returned_rss over it, per repetition); None when no run has RSS figures."""
    shares = {}
    ceilings = []
    for r in group:
        rss = r.get("host_returned_rss")
        base = static.get(r["rep"])
        if r["policy"] == "static" or not rss or not r.get("rss_samples") or base is None:
            continue
        times = [row["t"] for row in r["rss_samples"]]
        c = 0.0
        for g in guests:
            mx = r["guest_max_mib"][g]
            beats = base["guests"].get(g, {}).get("heartbeats", [])
            c += reactive_rss_gib_s(mx, needed_series(beats, mx), used_series(beats, mx), guard.get(g), times,
                                    period_s, kres(g, mx), floor, burst_window_s=burst_window_s)
        ceilings.append(c)
        shares.setdefault(r["policy"], []).append((rss["gib_s"], c))
    if not shares:
        return None
    lines = ["host returned (RSS) against its reactive ceiling (the unconstrained guest's memory in use "
             "above the reactive ceiling's size; free memory is returned by free page reporting under "
             "every policy): ceiling %s GiB*s" % median_range(ceilings)]
    summary = {"ceiling_gib_s": statistics.median(ceilings), "policies": {}}
    for label, pairs in sorted(shares.items()):
        share = [got / c for got, c in pairs if c > 0]
        lines.append("  %s: %s GiB*s, share %s" % (label, median_range([got for got, _ in pairs]),
                                                   median_range(share, "%.2f")))
        summary["policies"][label] = {"gib_s": statistics.median(got for got, _ in pairs),
                                      "share": statistics.median(share) if share else None}
    return {"lines": lines, "summary": summary}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+",
                    help="JSON written by bench/lab_policy_bench.py --out (.gz too)")
    ap.add_argument("--protect", action="append",
                    help="guest=MiB: the largest size that hot guest was measured to collapse at")
    ap.add_argument("--reserve-mib", type=float, default=0.0,
                    help="free memory a guest's kernel keeps, added to needed(t) (default 0)")
    ap.add_argument("--no-floor", action="store_true",
                    help="leave plimsolld's default floor out of the bound")
    ap.add_argument("--period-s", type=float, default=DEFAULT_PERIOD_S,
                    help="the reactive ceiling's report period: how late it sees a fall in demand")
    ap.add_argument("--reactive-reserve-mib", type=float, default=None,
                    help="the reactive ceiling's kernel reserve for every guest (default: by size, "
                    "58 MiB at 768 MiB, 79 at 1536)")
    ap.add_argument("--burst-window-s", type=float, default=0.0,
                    help="give the reactive ceiling burst room: the largest rise in demand over one "
                    "period within this many seconds (the law's window is 600; default 0: none)")
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
        for s in analyse(runs, protect, sys.stdout, args.reserve_mib, used, not args.no_floor,
                         args.period_s, args.reactive_reserve_mib, args.burst_window_s):
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
