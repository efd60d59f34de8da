#!/usr/bin/python3
"""Real-guest policy benchmark: every policy on the same lab, the same workloads, the same time.

Three 1 GiB TCG guests under a private libvirtd:
  stream  reads a --stream-mib file (default 700 MiB) through its page cache in a loop: a file
          that fits in the guest is re-read from cache (hot); a larger one streams (cold cache)
  hot     re-reads a 128 MiB file and reports its read throughput (hot cache: demand)
  anon    idles, then allocates --anon-mib of anonymous memory after --anon-after seconds
The guests may use --budget-mib together (default 2048 MiB, under their 3072 MiB). Every guest
runs plimsoll-agent (2 s interval) unless --no-agent; every policy sees the same inputs.

For each policy it starts a fresh lab, runs plimsolld for --seconds, samples libvirt's `actual`
and each guest's heartbeat (meminfo, vmstat, PSI) every 2 s, and reports:
  reclaimed GiB*s (sum over guests of (max - actual) over time), reclaimed at the end,
  hot guest throughput vs the unconstrained run (static policy, no budget), PSI stall seconds
  and file refaults per guest, balloon inflate/deflate pages (churn), OOM kills in any guest,
  time until the guests' total first fits the budget.

  sudo python3 bench/lab_policy_bench.py --policies=mom,proxmox,pagecache --seconds=150 \
      --out=docs/bench/lab_policy.json

Writes the JSON and a Markdown table (stdout), and one SVG of actual sizes per policy.
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
from harness import MIB  # noqa: E402

GUESTS = ("stream", "hot", "anon")


def run_policy(policy, args, budget_mib):
    workdir = tempfile.mkdtemp(prefix="plimsoll-bench-%s-" % policy)
    keys = harness.AgentKeys(workdir)
    lab = harness.labmod.Lab(state_dir=os.path.join(workdir, "lab"), workload_bin=harness.WORKLOAD,
                             stream_mib=args.stream_mib)
    daemon = None
    samples = []
    try:
        lab.start()
        extra = {}
        for name in GUESTS:
            kw = dict(workload=name, memory_mib=1024)
            if name == "anon":
                kw.update(anon_mib=args.anon_mib, anon_after=args.anon_after)
            if not args.no_agent:
                kw.update(keys.guest_kwargs(interval="2s"))
            lab.add_guest(name, **kw)
        for name in GUESTS:
            lab.wait_ready(name, timeout=120)
        flags = dict(tick=args.tick, stats_period_seconds=1, stale_after="5s", host_reserve_bytes=0,
                     policy=policy)
        if budget_mib:
            flags["guest_memory_budget_bytes"] = budget_mib * MIB
        if args.keep_logs:
            flags["log_every_decision"] = "true"  # holds too: each guest's steps can be followed
        daemon = harness.Daemon(workdir, lab.uri, agent_keys=keys, **flags)
        t0 = time.monotonic()
        first_hb = {n: lab.heartbeat(n) for n in GUESTS}
        while time.monotonic() - t0 < args.seconds:
            t = time.monotonic() - t0
            row = {"t": t}
            for n in GUESTS:
                try:
                    row[n] = lab.dommemstat(n).get("actual", 0) * 1024
                except Exception:
                    row[n] = None  # the guest died
            samples.append(row)
            time.sleep(2)
        last_hb = {}
        for n in GUESTS:
            try:
                last_hb[n] = lab.heartbeat(n)
            except Exception:
                last_hb[n] = None
        wl = {n: lab.workload_lines(n) for n in GUESTS}
        alive = set(lab.domains())
        log = daemon.read_log()
        if args.keep_logs:
            os.makedirs(args.keep_logs, exist_ok=True)
            with open(os.path.join(args.keep_logs, "plimsolld-%s.log" % policy), "w") as f:
                f.write(log)
    finally:
        if daemon:
            daemon.stop()
        lab.stop()

    dt = 2.0
    reclaimed_gibs = sum((1024 * MIB - (row[n] or 1024 * MIB)) * dt for row in samples for n in GUESTS) / (1 << 30)
    end = samples[-1]
    reclaimed_end = sum(1024 * MIB - (end[n] or 1024 * MIB) for n in GUESTS)
    fits = next((row["t"] for row in samples
                 if budget_mib and sum(row[n] or 0 for n in GUESTS) <= budget_mib * MIB), None)
    hot_mbps = [w["mbps"] for w in wl["hot"] if "mbps" in w and w.get("t", 0) > 10]
    per_guest = {}
    for n in GUESTS:
        a, b = first_hb.get(n), last_hb.get(n)
        if not a or not b:
            per_guest[n] = {"alive": n in alive}
            continue
        per_guest[n] = {
            "alive": n in alive,
            "psi_stall_s": max(0, b["psi_some_total_us"] - a["psi_some_total_us"]) / 1e6
            if a.get("psi_some_total_us", -1) >= 0 else None,
            "refaults": b["workingset_refault_file"] - a["workingset_refault_file"],
            "oom_kill": b["oom_kill"],
            "balloon_inflate_pages": b["balloon_inflate"],
            "balloon_deflate_pages": b["balloon_deflate"],
            "end_actual_mib": (end[n] or 0) / MIB,
        }
    return {
        "policy": policy,
        "budget_mib": budget_mib,
        "seconds": args.seconds,
        "reclaimed_gib_s": reclaimed_gibs,
        "reclaimed_end_mib": reclaimed_end / MIB,
        "fits_budget_after_s": fits,
        "hot_mbps_mean": statistics.mean(hot_mbps) if hot_mbps else None,
        "hot_mbps_samples": len(hot_mbps),
        # (guest seconds since the workload started, MB/s): where a policy costs throughput.
        "hot_mbps_series": [[w.get("t"), w["mbps"]] for w in wl["hot"] if "mbps" in w],
        "decisions_moved": log.count("direction=inflate") + log.count("direction=deflate"),
        "guests": per_guest,
        "samples": samples,
    }


def svg(results, path):
    """Actual guest sizes over time, one panel per policy (hand-written SVG, no dependencies)."""
    colors = {"stream": "#1f77b4", "hot": "#d62728", "anon": "#2ca02c"}
    w, h, pad = 420, 200, 30
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="11">' % (w * len(results), h + 40)]
    for i, r in enumerate(results):
        x0 = i * w
        parts.append('<text x="%d" y="14">%s (budget %s MiB)</text>' % (x0 + pad, r["policy"], r["budget_mib"] or "none"))
        tmax = max(row["t"] for row in r["samples"]) or 1
        for n in GUESTS:
            pts = " ".join("%.1f,%.1f" % (x0 + pad + (w - 2 * pad) * row["t"] / tmax,
                                          20 + h - (h - 20) * (row[n] or 0) / (1024 * MIB))
                           for row in r["samples"])
            parts.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (colors[n], pts))
        parts.append('<text x="%d" y="%d">0..%ds, 0..1024 MiB; stream blue, hot red, anon green</text>'
                     % (x0 + pad, h + 35, tmax))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default="mom,proxmox,pagecache")
    ap.add_argument("--seconds", type=int, default=150)
    ap.add_argument("--budget-mib", type=int, default=2048)
    ap.add_argument("--anon-mib", type=int, default=300)
    ap.add_argument("--stream-mib", type=int, default=700,
                    help="size of the streamed file; above the guest's 1024 MiB it cannot stay cached")
    ap.add_argument("--anon-after", type=int, default=60)
    ap.add_argument("--tick", default="2s")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--no-agent", action="store_true", help="guests run no plimsoll-agent")
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep-logs", default=None, metavar="DIR", help="write each policy's plimsolld log here, every decision included")
    args = ap.parse_args()
    reason = harness.skip_reason()
    if reason:
        sys.exit("cannot run: " + reason)
    results = []
    if not args.no_baseline:
        results.append(run_policy("static", args, None))
    for p in args.policies.split(","):
        results.append(run_policy(p, args, args.budget_mib))
    base = results[0]["hot_mbps_mean"] if not args.no_baseline else None
    print("| policy | reclaimed GiB*s | reclaimed at end MiB | fits budget after s | hot MB/s (vs unconstrained) "
          "| PSI stall s (stream/hot/anon) | file refaults (stream/hot/anon) | balloon deflate pages | OOM kills |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        g = r["guests"]
        rel = ("%+.1f%%" % (100 * (r["hot_mbps_mean"] / base - 1))) if base and r["hot_mbps_mean"] else "-"
        print("| %s | %.1f | %.0f | %s | %s (%s) | %s | %s | %s | %s |" % (
            r["policy"] + ("" if r["budget_mib"] else " (no budget)"), r["reclaimed_gib_s"],
            r["reclaimed_end_mib"], "%.0f" % r["fits_budget_after_s"] if r["fits_budget_after_s"] is not None else "-",
            "%.0f" % r["hot_mbps_mean"] if r["hot_mbps_mean"] else "-", rel,
            "/".join("%.1f" % g[n]["psi_stall_s"] if g[n].get("psi_stall_s") is not None else "-" for n in GUESTS),
            "/".join(str(g[n].get("refaults", "-")) for n in GUESTS),
            sum(g[n].get("balloon_deflate_pages", 0) for n in GUESTS),
            sum(g[n].get("oom_kill", 0) for n in GUESTS)))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
        svg(results, os.path.splitext(args.out)[0] + ".svg")
        print("wrote %s and %s" % (args.out, os.path.splitext(args.out)[0] + ".svg"))


if __name__ == "__main__":
    main()
