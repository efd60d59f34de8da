#!/usr/bin/python3
"""Seeded real-guest mixes for bench/lab_policy_bench.py (--mix=gen:SEED): mixes nobody tuned on.

generate(seed, seconds) draws, with random.Random(seed) alone (the same seed gives the same mix
on every machine and Python 3 version), 3-5 guests of 512-1536 MiB (multiples of 128), each one of

  hot     re-reads the first hot_mib MiB of the lab's hot file (10-40% of its memory) and reports
          its throughput
  stream  streams the lab's stream file (STREAM_FILE_MIB, larger than any guest)
  idle    does nothing
  anon    idles, then allocates 20-50% of its memory at alloc_at_s, 20-60% into the run

and, in half the mixes, a spike on one guest that is not anon: an allocation of 30-50% of its
memory (at most SPIKE_MAX_MIB, which the lab's guests touch in under the 5 s a stats period can
last) at 40-75% of the run, on top of its own workload (a hot guest's hot set shrinks to leave it
room). Allocations are made by bench/lab_mix_hook.sh (the lab's run= hook: it also starts the
agent), timed from the measured run's start (the bench's go file), not from the guest's boot.

The budget is drawn between the mix's need (the sum of each guest's max(plimsolld's floor, base +
hot set + allocation + kernel reserve)) and 85% of the guests' total, in multiples of 64 MiB: no
policy has to harm a guest to meet it, and it is below what the guests would hold unconstrained.
A mix whose need is above 80% of its total is drawn again (from the same generator).

The lab's files are the same for every generated mix (STREAM_FILE_MIB, HOT_FILE_MIB), so one data
disk image serves them all.

  python3 bench/lab_mix_gen.py 101 102 --seconds=150   # prints the mixes' descriptions
"""

import argparse
import json
import math
import random
import sys

# The lab's files for every generated mix: the stream file is larger than the largest guest
# (so it streams, never stays cached), the hot file holds the largest hot set (40% of 1536 MiB).
STREAM_FILE_MIB = 2048
HOT_FILE_MIB = 640

MEM_MIN_MIB, MEM_MAX_MIB, MEM_STEP_MIB = 512, 1536, 128
GUESTS_MIN, GUESTS_MAX = 3, 5
KINDS = ("hot", "stream", "idle", "anon")
HOT_SHARE = (0.10, 0.40)
ANON_SHARE = (0.20, 0.50)
ANON_AT = (0.20, 0.60)  # share of the run
SPIKE_SHARE = (0.30, 0.50)
SPIKE_AT = (0.40, 0.75)
SPIKE_PROBABILITY = 0.5
# The largest spike: 512 MiB took a lab guest 3.2 s to touch (1 GiB guest, beside a streaming, a
# hot and another allocating guest, on a loaded 2-core host), under a 5 s stats period.
SPIKE_MAX_MIB = 512
# A guest's memory that is neither page cache nor free with its workload and the agent running
# (the stream guest's M - MemFree - Cached is ~105 MiB: bench/lab_limit.py), rounded up.
BASE_MIB = 112
BUDGET_STEP_MIB = 64
BUDGET_TOP_SHARE = 0.85
NEED_MAX_SHARE = 0.80  # a mix that needs more is drawn again
ALLOC_STEP_MIB = 16


def floor_mib(mem_mib):
    """plimsolld's default floor: max(256 MiB, 25% of the guest) (config.proto GuestDefaults)."""
    return max(256, 0.25 * mem_mib)


def kernel_reserve_mib(mem_mib):
    """The free memory a squeezed guest's kernel keeps (its watermarks), by guest size: a line
    through the two measured points, 58 MiB at 768 MiB and 79 MiB at 1536 (docs/policy.md)."""
    return 58.0 + (mem_mib - 768) * 21.0 / 768


def guest_need_mib(g):
    """The least the guest can be held at without harm: the floor, or what it holds at its peak
    (base, hot set, allocation) plus its kernel's reserve; at most its memory."""
    m = g["memory_mib"]
    held = BASE_MIB + (g.get("hot_mib") or 0) + (g.get("alloc_mib") or 0) + kernel_reserve_mib(m)
    return min(m, max(floor_mib(m), held))


def _round(v, step):
    return int(step * round(v / step))


def _draw(rng, seconds):
    """One candidate mix (guests only): every draw in a fixed order."""
    n = rng.randint(GUESTS_MIN, GUESTS_MAX)
    guests = []
    for i in range(n):
        mem = rng.randrange(MEM_MIN_MIB, MEM_MAX_MIB + 1, MEM_STEP_MIB)
        kind = rng.choice(KINDS)
        g = {"memory_mib": mem, "kind": kind}
        if kind == "hot":
            g["hot_mib"] = max(1, int(round(mem * rng.uniform(*HOT_SHARE))))
        if kind == "anon":
            g["alloc_mib"] = _round(mem * rng.uniform(*ANON_SHARE), ALLOC_STEP_MIB)
            g["alloc_at_s"] = int(round(seconds * rng.uniform(*ANON_AT)))
        guests.append(g)
    spiky = rng.random() < SPIKE_PROBABILITY
    candidates = [i for i, g in enumerate(guests) if g["kind"] != "anon"]
    pick = rng.choice(candidates) if candidates else None
    share = rng.uniform(*SPIKE_SHARE)
    at = rng.uniform(*SPIKE_AT)
    if spiky and pick is not None:
        g = guests[pick]
        m = g["memory_mib"]
        spike = min(SPIKE_MAX_MIB, _round(m * share, ALLOC_STEP_MIB))
        g["alloc_mib"] = spike
        g["alloc_at_s"] = int(round(seconds * at))
        g["spike"] = True
        if g["kind"] == "hot":
            # Room for the spike on top of the hot set, within 92% of the guest.
            room = int(0.92 * m - BASE_MIB - kernel_reserve_mib(m) - spike)
            if room < HOT_SHARE[0] * m:
                g["kind"] = "stream"  # no room for a hot set worth the name: stream under it
                del g["hot_mib"]
            else:
                g["hot_mib"] = min(g["hot_mib"], room)
    for i, g in enumerate(guests):
        g["name"] = "g%d-%s%s" % (i, g["kind"], "-spike" if g.get("spike") else "")
    return guests


def generate(seed, seconds=150):
    """The mix of `seed` for a run of `seconds`: a dict with name, seed, seconds, guests (each
    name, kind, memory_mib, and hot_mib / alloc_mib, alloc_at_s, spike where they apply),
    total_mib, need_mib, budget_mib, stream_file_mib, hot_file_mib. Same seed and seconds, same
    mix."""
    rng = random.Random(seed)
    for _ in range(1000):
        guests = _draw(rng, seconds)
        total = sum(g["memory_mib"] for g in guests)
        need = sum(guest_need_mib(g) for g in guests)
        if need <= NEED_MAX_SHARE * total:
            break
    else:  # pragma: no cover (the odds of 1000 draws over the limit are nil)
        raise RuntimeError("seed %r: no feasible mix in 1000 draws" % (seed,))
    lo = int(math.ceil(need / BUDGET_STEP_MIB)) * BUDGET_STEP_MIB
    hi = int(BUDGET_TOP_SHARE * total) // BUDGET_STEP_MIB * BUDGET_STEP_MIB
    budget = lo + rng.randint(0, max(0, (hi - lo) // BUDGET_STEP_MIB)) * BUDGET_STEP_MIB
    return {
        "name": "gen:%s" % seed,
        "seed": seed,
        "seconds": seconds,
        "guests": guests,
        "total_mib": total,
        "need_mib": round(need, 1),
        "budget_mib": budget,
        "stream_file_mib": STREAM_FILE_MIB,
        "hot_file_mib": HOT_FILE_MIB,
    }


def parse_seed(mix):
    """The seed of a mix name "gen:SEED" (an int), or None for any other name."""
    if not mix.startswith("gen:"):
        return None
    try:
        return int(mix[4:])
    except ValueError:
        raise SystemExit("--mix %r: the seed of a generated mix is an integer (gen:101)" % mix)


def describe_guest(g):
    """One guest in a few words: "g1-hot 1024 MiB hot 256 MiB (25%)"."""
    m = g["memory_mib"]
    parts = ["%s %d MiB" % (g["name"], m)]
    if g.get("hot_mib"):
        parts.append("re-reads %d MiB (%.0f%%)" % (g["hot_mib"], 100.0 * g["hot_mib"] / m))
    if g["kind"] == "stream":
        parts.append("streams %d MiB" % STREAM_FILE_MIB)
    if g["kind"] == "idle" and not g.get("alloc_mib"):
        parts.append("idle")
    if g.get("alloc_mib"):
        parts.append("%s %d MiB (%.0f%%) at %d s" % ("spikes" if g.get("spike") else "allocates",
                                                    g["alloc_mib"], 100.0 * g["alloc_mib"] / m,
                                                    g["alloc_at_s"]))
    return " ".join(parts)


def describe(mix):
    """The mix in one line."""
    return "%s: %s; budget %d MiB (need %.0f, %.0f%% of %d)" % (
        mix["name"], ", ".join(describe_guest(g) for g in mix["guests"]), mix["budget_mib"],
        mix["need_mib"], 100.0 * mix["budget_mib"] / mix["total_mib"], mix["total_mib"])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("seeds", nargs="+", type=int)
    ap.add_argument("--seconds", type=int, default=150)
    ap.add_argument("--json", action="store_true", help="print the mixes as JSON")
    args = ap.parse_args(argv)
    mixes = [generate(s, args.seconds) for s in args.seeds]
    if args.json:
        json.dump(mixes, sys.stdout, indent=1)
        print()
    else:
        for m in mixes:
            print(describe(m))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
