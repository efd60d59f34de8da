#!/usr/bin/python3
"""The simulator against real guests: each real guest of a calibration run beside its model.

Input: the JSON of bench/lab_policy_bench.py runs of the calibration mixes (cal768, cal1536:
one guest per lab workload, all of one size), each mix and agent mode with its unconstrained
baseline (static policy, no budget) and the policies to compare. For every (mix, agent mode):

1. it writes the model of that lab as a scenario file (--scenario_dir), with every parameter
   read off the *baseline* run, never off the runs being compared: each guest's size outside
   MemTotal (kernel=), its unreclaimable memory, its anonymous memory and page cache at the
   start, when the anon guest allocated, the streaming guest's throughput (its stream_rate and
   every guest's disk_rate: the lab's disks are one host file read with cache=none), the hot
   guest's re-read rate, and the balloon's speed (--speed, measured separately: see
   docs/policy.md "Calibration");
2. it plays the same policies on those scenarios (bazel-bin/sim/simulate, built by
   `bazel build //sim:simulate`);
3. it prints, per policy and guest, real against model: PSI stall seconds, file refaults,
   disk reads (libvirt's block stats), balloon traffic (inflated + deflated) and memory
   reclaimed at the end, with the ratio; a ratio over 1.5 is marked. Values too small to
   compare (both under --floor_*) count as agreeing.

  # the recorded real runs (docs/bench/calibration_real.json.gz) were made with
  sudo python3 bench/lab_policy_bench.py --mix=cal768,cal1536 --agent=both --policies=pagecache,mom \\
      --stream-mib=2048 --seconds=150 --out=/tmp/cal.json
  . tools/bazel_env.sh && bazel build //sim:simulate
  python3 bench/calibrate.py          # the recorded runs; --real=/tmp/cal.json for new ones
"""

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "bench"))
import lab_policy_bench  # noqa: E402  (the mixes: hot set and allocation of each guest)

MIB = 1 << 20
PAGE = 4096
# The recorded runs name their policies as they were run: there `pagecache` is the rule heap,
# deleted (its code, and the models of those runs, are at commit 280c340), which the simulator
# cannot play; the `pagecache` here is another policy. Those runs are not modelled; their
# guests still count where the guest is measured (min_free from the squeezed guests).
RECORDED = os.path.join(REPO, "docs", "bench", "calibration_real.json.gz")
RECORDED_DELETED_POLICIES = {"pagecache"}
MEASURES = [  # (key, label, unit, floor: both under it count as agreeing)
    ("stall_s", "stall s", "s", "floor_stall_s"),
    ("refault_mib", "refaults MiB", "MiB", "floor_mib"),
    ("disk_read_mib", "disk reads MiB", "MiB", "floor_mib"),
    ("traffic_mib", "balloon traffic MiB", "MiB", "floor_mib"),
    ("reclaimed_end_mib", "reclaimed at end MiB", "MiB", "floor_mib"),
]


def mib(v):
    return "%dMiB" % max(0, int(round(v)))


def rate(bytes_per_s):
    return "%dKiB/s" % max(1, int(round(bytes_per_s / 1024)))


def guest_specs(mix):
    """{name: (workload, memory MiB, hot MiB or None, anon MiB or None)} of a bench mix."""
    return {g[0]: (g[1], g[2], g[3], g[4]) for g in lab_policy_bench.MIXES[mix]["guests"]}


def window(beats):
    """(first, last) heartbeat of a guest's measured window."""
    return beats[0], beats[-1]


def allocation_time(beats, anon_mib):
    """Seconds into the window when the guest's anon grew by half the allocation, or None."""
    first = beats[0]
    for b in beats:
        if (b["anon_kb"] - first["anon_kb"]) * 1024 >= anon_mib * MIB / 2:
            return max(0.0, b["uptime"] - first["uptime"])
    return None


def alloc_rate(base):
    """The fastest anonymous growth between two heartbeats of the baseline (bytes/s): how fast
    the lab's guest touches new memory when nothing stands in its way."""
    best = 0.0
    for g in base["guests"].values():
        beats = g.get("heartbeats") or []
        for a, b in zip(beats, beats[1:]):
            dt = b["uptime"] - a["uptime"]
            if dt > 0:
                best = max(best, (b["anon_kb"] - a["anon_kb"]) * 1024 / dt)
    return best


def stall_noise(guest):
    """The relative standard deviation of a steadily refaulting guest's stall from one
    heartbeat interval (2 s) to the next, as a per-second figure (x sqrt(2)): pace_noise."""
    beats = guest.get("heartbeats") or []
    fr = [(b["psi_some_total_us"] - a["psi_some_total_us"]) / 1e6 / (b["uptime"] - a["uptime"])
          for a, b in zip(beats, beats[1:]) if b["uptime"] > a["uptime"]]
    fr = fr[len(fr) // 4:]  # once the first pass is over
    if len(fr) < 4 or statistics.mean(fr) <= 0:
        return 0.0
    return min(0.5, statistics.pstdev(fr) / statistics.mean(fr) * 2 ** 0.5)


def squeezed_free(runs):
    """The median MemFree (bytes) of guests held at least 30% under their max with some page
    cache left: the free memory a squeezed guest's kernel keeps (watermarks, reserves). No
    unconstrained run squeezes anyone, so this one parameter is read off the compared runs;
    it is the guest kernel's, the same under every policy."""
    frees = []
    for r in runs:
        if r["budget_mib"] is None:
            continue
        for n, g in r["guests"].items():
            beats = g.get("heartbeats") or []
            for b in beats:
                t = b["uptime"] - beats[0]["uptime"]
                s = min(r["samples"], key=lambda s: abs(s["t"] - t))
                cache_kb = b["active_file_kb"] + b["inactive_file_kb"]
                if s.get(n) and s[n] < 0.7 * r["guest_max_mib"][n] * MIB and cache_kb > 20 * 1024:
                    frees.append(b["memfree_kb"] * 1024)
    return statistics.median(frees) if frees else None


def scenario_text(base, run, stream_mib, args, min_free):
    """The model of one real run as a scenario file: the workloads' rates and the guests' sizes
    from the unconstrained baseline `base`, the state at the start (anon, cache) and when the
    anon guest allocated from `run` itself (boot order moves them from run to run)."""
    mix, agent = run["mix"], run["agent"]
    specs = guest_specs(mix)
    name = "%s_%s_%s" % (mix, "agent" if agent else "noagent", run["policy"])
    stream = [n for n, s in specs.items() if s[0] == "stream"]
    if not stream or stream[0] not in base.get("mbps_by_guest", {}):
        sys.exit("%s: the baseline has no streaming guest's throughput" % name)
    # The lab's disks are one host file read with cache=none: the streaming guest, which reads
    # from disk all the time, shows how fast a guest can read, and (a loop larger than the
    # guest refaults on every read) what part of that time PSI counts as a memory stall.
    disk_rate = base["mbps_by_guest"][stream[0]] * 1e6
    stall = base["guests"][stream[0]].get("psi_stall_s")
    refault_stall = min(1.0, stall / base["seconds"]) if stall is not None else 1.0
    pace_noise = args.pace_noise if args.pace_noise is not None else stall_noise(base["guests"][stream[0]])
    lines = [
        "# The model of the real-guest calibration run %s (bench/calibrate.py wrote it from the" % name,
        "# real runs' JSON; docs/policy.md \"Calibration\"). Do not edit: rerun the script.",
        "scenario name=%s duration=%ds tick=%s stale_after=5s" % (name, run["seconds"], args.tick),
        "description %s as measured: one guest per lab workload, all of %d MiB, %s." % (
            mix, list(run["guest_max_mib"].values())[0], "agent" if agent else "no agent"),
        "host total=64GiB reserve=0 budget=%s" % mib(run["budget_mib"]),
    ]
    alloc = alloc_rate(base)
    for n, (workload, mem, hot, anon) in specs.items():
        base_beats = base["guests"][n].get("heartbeats") or []
        beats = run["guests"][n].get("heartbeats") or []
        if not base_beats or not beats:
            sys.exit("%s: no heartbeats of guest %s (a JSON from before calibrate.py?)" % (name, n))
        b0, first = base_beats[0], beats[0]
        memtotal = b0["memtotal_kb"] * 1024
        file_cache = (first["active_file_kb"] + first["inactive_file_kb"]) * 1024
        anon_bytes = first["anon_kb"] * 1024
        b0_file = (b0["active_file_kb"] + b0["inactive_file_kb"]) * 1024
        unreclaimable = memtotal - b0["memfree_kb"] * 1024 - b0["anon_kb"] * 1024 - b0_file
        kernel = mem * MIB - memtotal
        minimum = max(256 * MIB, 0.25 * mem * MIB)
        lines.append(
            "guest name=%s max=%s min=%s cache=%s agent=%s autodeflate=true speed=%dMiB/s "
            "kernel=%s unreclaimable=%s alloc_rate=%s disk_rate=%s refault_stall=%.2f pace_noise=%.2f "
            "min_free=%s "
            "stats_period=2s" % (
                n, mib(mem), mib(minimum / MIB), mib(file_cache / MIB), "true" if agent else "false",
                args.speed_mib_s, mib(kernel / MIB), mib(max(0, unreclaimable) / MIB), rate(alloc),
                rate(disk_rate), refault_stall, pace_noise, mib(min_free / MIB)))
        if args.legacy_model:
            # The model before calibration knew none of these keys (docs/policy.md "Calibration").
            for key in ("cache", "refault_stall", "pace_noise", "min_free"):
                lines[-1] = " ".join(w for w in lines[-1].split() if not w.startswith(key + "="))
        phase = "phase guest=%s at=0 anon=%s" % (n, mib(anon_bytes / MIB))
        if workload == "stream":
            phase += " stream_rate=%s loop=%s" % (rate(base["mbps_by_guest"][n] * 1e6), mib(stream_mib))
        elif workload == "hot":
            phase += " hot=%s hot_rate=%s" % (mib(hot), rate(base["mbps_by_guest"][n] * 1e6))
        lines.append(phase)
        if workload == "anon":
            at = allocation_time(beats, anon)
            if at is None:
                sys.exit("%s: the anon guest never allocated" % name)
            lines.append("phase guest=%s at=%ds anon=%s" % (n, int(round(at)), mib(anon_bytes / MIB + anon)))
    return name, "\n".join(lines) + "\n"


def real_measures(run, n):
    g = run["guests"][n]
    beats = g.get("heartbeats") or []
    out = {"stall_s": g.get("psi_stall_s"),
           "refault_mib": g["refaults"] * PAGE / MIB if "refaults" in g else None,
           "disk_read_mib": g["disk_read_bytes"] / MIB if "disk_read_bytes" in g else None,
           "reclaimed_end_mib": run["guest_max_mib"][n] - g["end_actual_mib"] if "end_actual_mib" in g else None,
           "oom_kills": g.get("oom_kill")}
    if len(beats) >= 2:
        a, b = window(beats)
        out["traffic_mib"] = ((b["balloon_inflate"] - a["balloon_inflate"]) +
                              (b["balloon_deflate"] - a["balloon_deflate"])) * PAGE / MIB
    else:
        out["traffic_mib"] = None
    return out


def model_measures(run, n, max_mib):
    g = run["guests"][n]
    return {"stall_s": g["stall_s"], "refault_mib": g["refault_mib"], "disk_read_mib": g["disk_read_mib"],
            "traffic_mib": g["traffic_mib"], "reclaimed_end_mib": max_mib - g["final_actual_mib"],
            "oom_kills": g["oom_kills"]}


def ratio(real, model, floor):
    """model / real; 1.0 when both are under the floor; None when one is missing."""
    if real is None or model is None:
        return None
    if abs(real) < floor and abs(model) < floor:
        return 1.0
    lo = max(abs(real), floor)
    return abs(model) / lo if abs(model) >= floor else floor / lo


def off(r):
    return r is not None and (r > 1.5 or r < 1 / 1.5)


# The model's metric (sim/runner.h, per guest) of each compared figure, and its unit factor.
METRIC = {"stall_s": ("stall_s", 1.0), "refault_mib": ("refault_gib", 1 / 1024.0),
          "disk_read_mib": ("disk_read_mib", 1.0), "traffic_mib": ("traffic_mib", 1.0)}


def write_expectations(rows, files, real, args):
    """Appends to each run's scenario an `expect` pair for every figure where the model agrees
    with the real run (within 1.5x, or both under the floor), so that //sim:scenarios_test
    fails when a model change breaks an agreement; a figure that disagrees is written down as a
    comment with both values."""
    by_run = {}
    for run in real:
        if id(run) in files:
            by_run[(run["mix"], run["agent"], run["policy"])] = files[id(run)][1]
    out = {}
    for row in rows:
        if row["guest"] == "(all)":
            continue
        path = by_run[(row["mix"], row["agent"], row["policy"])]
        lines = out.setdefault(path, [])
        for key, label, unit, floor_arg in MEASURES:
            rv, mv, q = row["real"][key], row["model"][key], row["ratio"][key]
            if rv is None or mv is None:
                continue
            floor = getattr(args, floor_arg)
            if off(q):
                lines.append("# differs: %s %s real %.1f model %.1f (docs/policy.md \"Calibration\")" % (
                    row["guest"], label, rv, mv))
                continue
            if key == "reclaimed_end_mib":
                continue  # the end size is the policy's path, not the model's physics: compared, not asserted
            name, factor = METRIC[key]
            metric = "guest.%s.%s" % (row["guest"], name)
            if abs(rv) < floor and abs(mv) < floor:
                lines.append("expect %s %s < %g" % (row["policy"], metric, floor * factor))
            else:
                lines.append("expect %s %s >= %.6g" % (row["policy"], metric, max(rv / 1.5, 0) * factor))
                lines.append("expect %s %s <= %.6g" % (row["policy"], metric, max(rv * 1.5, floor) * factor))
    for path, lines in out.items():
        with open(path, "a") as f:
            f.write("# The real run's figures the model must stay within 1.5x of (bench/calibrate.py):\n")
            f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--real", default=RECORDED,
                    help="comma-separated lab_policy_bench.py JSON files (.gz read as gzip); default: "
                         "the recorded calibration runs")
    ap.add_argument("--scenario_dir", default=os.path.join(REPO, "sim", "scenarios", "calibration"))
    ap.add_argument("--simulate", default=os.path.join(REPO, "bazel-bin", "sim", "simulate"))
    ap.add_argument("--stream_mib", type=int, default=2048, help="the streamed file (--stream-mib of the runs)")
    ap.add_argument("--speed_mib_s", type=int, default=64,
                    help="the balloon's speed in the model (the lab's TCG balloons: 25-90 MiB/s)")
    ap.add_argument("--min_free_mib", type=int, default=None,
                    help="free memory a squeezed guest keeps (min_free= of the model); default: "
                         "measured, the median MemFree of the squeezed guests of each mix")
    ap.add_argument("--tick", default="2s", help="the runs' --tick")
    ap.add_argument("--pace_noise", type=float, default=None,
                    help="pace_noise= of the model; default: measured on the baseline's streaming guest")
    ap.add_argument("--floor_stall_s", type=float, default=1.0)
    ap.add_argument("--floor_mib", type=float, default=16.0)
    ap.add_argument("--legacy_model", action="store_true",
                    help="write scenarios the model before calibration reads (with --simulate of that "
                         "model's binary): the table's \"before\"")
    ap.add_argument("--out", default=None, help="write real and model side by side as JSON")
    args = ap.parse_args()

    real = []
    unplayable = set()  # id() of the runs whose policy the simulator cannot play
    for path in args.real.split(","):
        with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
            runs = json.load(f)
        if os.path.realpath(path) == os.path.realpath(RECORDED):
            unplayable |= {id(r) for r in runs if r["policy"] in RECORDED_DELETED_POLICIES}
        # The simulator does not model in-guest reclaim (lab_policy_bench.py's "+reclaim" runs).
        unplayable |= {id(r) for r in runs if r.get("in_guest_reclaim")}
        real.extend(runs)
    groups = {}
    for r in real:
        groups.setdefault((r["mix"], r["agent"]), []).append(r)
    os.makedirs(args.scenario_dir, exist_ok=True)
    files = {}  # id(run) -> (scenario name, path)
    for (mix, agent), runs in sorted(groups.items()):
        bases = [r for r in runs if r["budget_mib"] is None]
        if not bases:
            sys.exit("%s: no unconstrained baseline run" % mix)
        min_free = args.min_free_mib * MIB if args.min_free_mib is not None else squeezed_free(
            [r for r in real if r["mix"] == mix])
        if min_free is None:
            sys.exit("%s: no squeezed guest to read min_free from (pass --min_free_mib)" % mix)
        for run in runs:
            if run["budget_mib"] is None or id(run) in unplayable:
                continue
            name, text = scenario_text(bases[0], run, args.stream_mib, args, min_free)
            path = os.path.join(args.scenario_dir, name + ".scenario")
            with open(path, "w") as f:
                f.write(text)
            files[id(run)] = (name, path)
    if not os.path.exists(args.simulate):
        sys.exit("no %s: run `bazel build //sim:simulate` first" % args.simulate)
    sim = {}
    with tempfile.TemporaryDirectory() as tmp:
        for run in real:
            if id(run) not in files:
                continue
            name, path = files[id(run)]
            out = os.path.join(tmp, name + ".json")
            subprocess.run([args.simulate, "--scenarios=" + path, "--policies=" + run["policy"],
                            "--check=false", "--json=" + out], check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                sim[id(run)] = json.load(f)["runs"][0]

    rows = []
    for (mix, agent), runs in sorted(groups.items()):
        for run in runs:
            if run["budget_mib"] is None or id(run) in unplayable:
                continue
            model = sim[id(run)]
            for n in run["guest_max_mib"]:
                rm = real_measures(run, n)
                mm = model_measures(model, n, run["guest_max_mib"][n])
                row = {"mix": mix, "agent": agent, "policy": run["policy"], "guest": n,
                       "workload": guest_specs(mix)[n][0], "real": rm, "model": mm, "ratio": {}}
                for key, _, _, floor in MEASURES:
                    row["ratio"][key] = ratio(rm[key], mm[key], getattr(args, floor))
                rows.append(row)
            rows.append({"mix": mix, "agent": agent, "policy": run["policy"], "guest": "(all)",
                         "reclaimed_gib_s": {"real": run["reclaimed_gib_s"], "model": model["reclaimed_gib_s"]}})

    if not args.legacy_model:
        write_expectations(rows, files, real, args)

    print("| mix | agent | policy | guest | " + " | ".join("%s real / model" % m[1] for m in MEASURES) + " | OOM |")
    print("|---|---|---|---|" + "---:|" * len(MEASURES) + "---:|")
    flagged = 0
    for row in rows:
        if row["guest"] == "(all)":
            rg = row["reclaimed_gib_s"]
            print("| %s | %s | %s | **all: reclaimed GiB·s** | %.0f / %.0f (%.2fx) |%s" % (
                row["mix"], "on" if row["agent"] else "off", row["policy"], rg["real"], rg["model"],
                rg["model"] / rg["real"] if rg["real"] else float("nan"), " |" * len(MEASURES)))
            continue
        cells = []
        for key, _, _, _ in MEASURES:
            rv, mv, q = row["real"][key], row["model"][key], row["ratio"][key]
            if rv is None or mv is None:
                cells.append("-")
                continue
            mark = " **%.1fx**" % q if off(q) else ""
            flagged += 1 if off(q) else 0
            cells.append("%.0f / %.0f%s" % (rv, mv, mark) if key != "stall_s" else "%.1f / %.1f%s" % (rv, mv, mark))
        print("| %s | %s | %s | %s (%s) | %s | %s / %s |" % (
            row["mix"], "on" if row["agent"] else "off", row["policy"], row["guest"], row["workload"],
            " | ".join(cells), row["real"]["oom_kills"], row["model"]["oom_kills"]))
    print("\n%d of %d compared figures differ by more than 1.5x (bold: model / real)" % (
        flagged, sum(1 for r in rows if r["guest"] != "(all)") * len(MEASURES)))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"scenarios": sorted(os.path.relpath(p, REPO) for _, p in files.values()),
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
