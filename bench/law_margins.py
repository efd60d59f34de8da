#!/usr/bin/env python3
"""Where an agentless guest's memory went under the law: its floor's parts, integrated.

Reads plimsolld decision logs (lab_policy_bench.py --keep-logs) and, for each guest whose
decision came from libvirt's stats (src=libvirt: no agent), splits its balloon size at every
decision into the law's floor parts (docs/policy.md, F = H + h + burst):

  hard      H, the guest's hard demand as libvirt shows it: actual - usable (MemAvailable)
  headroom  h, what the floor keeps above H besides the burst room: floor - burst - H
  burst     the burst room: the largest rise of H per report within the burst window
  above     the size above the floor: takes not made yet, probes stopped, edges, cooldowns

each integrated over time (GiB*s, a decision's figures standing until the guest's next one),
beside what was reclaimed (max - actual). The reactive ceiling of bench/lab_limit.py keeps none of
headroom beyond the kernel's reserve and no burst room: this says how much of a policy's gap to
it each margin is.

  python3 bench/law_margins.py docs/bench/law_logs/trio_noagent_61_ratio2_rep*.log.gz

The logs (plain or gzipped) are lab_policy_bench.py's --keep-logs files.

Results: docs/benchmarks.md ("Streaming takes without the agent").
"""
import argparse
import collections
import datetime
import gzip
import re
import sys

PARTS = ("reclaimed", "hard", "headroom", "burst", "above")


def mib(key, text):
    m = re.search(r"\b%s=([0-9.]+)MiB" % key, text)
    return float(m.group(1)) if m else None


def decision(line):
    """(time s, guest, {field: MiB}) of an agentless decision line, else None."""
    if "decision tick=" not in line or "src=libvirt" not in line:
        return None
    head, _, reason = line.partition(" reason=")
    fields = {"actual": mib("actual", head), "max": mib("max", head), "usable": mib("usable", head),
              "floor": mib("floor", reason), "burst": mib("burst", reason)}
    if any(v is None for v in fields.values()):
        return None
    stamp = line.split()[1].rstrip("Z")[:26]
    t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f").timestamp()
    return t, re.search(r"\bguest=(\S+)", head).group(1), fields


def margins(lines):
    """{guest: {part: GiB*s, "seconds": s}} of one log."""
    out = collections.defaultdict(lambda: collections.Counter())
    last = {}
    for line in lines:
        d = decision(line)
        if d is None:
            continue
        t, guest, f = d
        if guest in last:
            t0, g = last[guest]
            dt = t - t0
            hard = min(max(0.0, g["actual"] - g["usable"]), g["floor"])
            burst = min(g["burst"], g["floor"] - hard)
            parts = {
                "reclaimed": g["max"] - g["actual"],
                "hard": hard,
                "headroom": max(0.0, g["floor"] - burst - hard),
                "burst": burst,
                "above": max(0.0, g["actual"] - g["floor"]),
            }
            for k, v in parts.items():
                out[guest][k] += v * dt / 1024.0
            out[guest]["seconds"] += dt
        last[guest] = (t, f)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    args = ap.parse_args()
    per_guest = collections.defaultdict(list)
    for path in args.logs:
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            for guest, parts in margins(f).items():
                per_guest[guest].append(parts)
    if not per_guest:
        sys.exit("no agentless decisions (src=libvirt) in %s" % ", ".join(args.logs))
    print("GiB*s per guest, mean of %d logs (range)" % len(args.logs))
    print("| guest | " + " | ".join(PARTS) + " |")
    print("|---|" + "---:|" * len(PARTS))
    totals = collections.defaultdict(list)
    for guest in sorted(per_guest):
        runs = per_guest[guest]
        cells = []
        for k in PARTS:
            values = [r[k] for r in runs]
            totals[k].append(sum(values) / len(values))
            cells.append("%.1f (%.1f..%.1f)" % (sum(values) / len(values), min(values), max(values)))
        print("| %s | %s |" % (guest, " | ".join(cells)))
    print("| total | %s |" % " | ".join("%.1f" % sum(totals[k]) for k in PARTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
