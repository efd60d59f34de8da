#!/usr/bin/env python3
"""Where a control-loop tick's CPU goes: perf samples of bench/control_loop_benchmark, by part.

Records one benchmark (e.g. static/driver/10000) with call graphs, keeps the samples taken
inside ControlLoop::Tick, and charges each to the first part of the daemon found walking
from the sampled function up: libvirt (any frame in libvirt, libxml2 or glib: with test:///
that is the in-process test driver), or the plimsoll function's part (hypervisor adapter,
tracker, controls, policy Decide, apply, published view, metrics, watch events, ...).

plimsolld's own CPU per tick is the tick's CPU time less the test driver's share: the
benchmark's CPU per tick times the share of the tick's samples outside libvirt, libxml2 and
glib (what libvirtd would spend on a real host). Printed last, from this run's CPU per tick;
docs/benchmarks.md multiplies the share by the median of separate runs without perf.

    bazel build -c opt //bench:control_loop_benchmark
    python3 bench/tick_profile.py --benchmark=static/driver/10000 --ticks=40

Needs perf (Debian's linux-perf). Results: docs/benchmarks.md, "Control loop at scale".
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# First match wins: the part of the daemon a plimsoll function belongs to.
PARTS = [
    ("policy::", "policy Decide"),
    ("ControlLoop::ComputeControls", "controls (overrides, floors)"),
    ("Metrics", "metrics"),
    ("EventsBetween", "watch events"),
    ("WatchHub", "watch events"),
    ("GuestTracker", "tracker"),
    ("AgentStore", "agent store"),
    ("LogMessage", "logging"),
    ("ControlLoop::Apply", "apply"),
    ("ControlLoop::Publish", "published view"),
    ("v1::", "published view"),
    ("hypervisor::", "hypervisor adapter (our side of libvirt calls)"),
    ("ControlLoop::", "loop bookkeeping"),
]
LIBVIRT = "libvirt (the in-process test driver)"
FRAME = re.compile(r"[0-9a-f]+\s+(.*)\s+\((.*)\)$")


def part_of(function):
    for key, part in PARTS:
        if key in function:
            return part
    return "other plimsoll code"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", default="static/driver/10000", help="policy/stats/guests")
    ap.add_argument("--ticks", type=int, default=40)
    ap.add_argument("--binary", default=os.path.join(ROOT, "bazel-bin/bench/control_loop_benchmark"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "perf.data")
        env = dict(os.environ, PLIMSOLL_BENCH_TICKS=str(args.ticks))
        run = subprocess.run(["perf", "record", "-q", "-F", "499", "--call-graph=dwarf,16384", "-o", data, args.binary,
                              "--benchmark_filter=BM_Tick/%s/" % args.benchmark],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
        print(line or "(no benchmark output)")
        # "BM_Tick/...   <real> ms   <cpu> ms   <iterations> ...": the CPU per tick.
        m = re.search(r"\s[0-9.]+ ms\s+([0-9.]+) ms\s", line)
        tick_cpu_ms = float(m.group(1)) if m else None
        # --no-inline: resolving inlined frames runs addr2line per address, minutes a profile (and
        # it has hung); a sample in inlined code is charged to the function it was inlined into.
        script = subprocess.run(["perf", "script", "--no-inline", "-i", data], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True).stdout
    parts = collections.Counter()
    total = 0
    for sample in script.split("\n\n"):
        frames = []
        for line in sample.strip().split("\n")[1:]:
            m = FRAME.match(line.strip())
            if m:
                frames.append((re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)), m.group(2)))
        if not any("ControlLoop::Tick" in f for f, _ in frames):
            continue
        total += 1
        part = "other (no plimsoll frame)"
        for function, dso in frames:
            if "libvirt.so" in dso or "libxml2" in dso or "libglib" in dso:
                part = LIBVIRT
                break
            if "plimsoll::" in function:
                part = part_of(function)
                break
        parts[part] += 1
    if total == 0:
        sys.exit("no samples inside ControlLoop::Tick (is perf allowed? kernel.perf_event_paranoid)")
    print("samples inside ControlLoop::Tick: %d" % total)
    for part, n in parts.most_common():
        print("%5.1f%%  %s" % (100.0 * n / total, part))
    own = 1.0 - parts[LIBVIRT] / total
    if tick_cpu_ms is not None:
        print("own CPU per tick (outside the test driver): %.1f ms = %.1f ms x %.3f" % (
            tick_cpu_ms * own, tick_cpu_ms, own))
    else:
        print("own share of the tick: %.3f" % own)


if __name__ == "__main__":
    main()
