#!/usr/bin/python3
"""Real-guest policy benchmark: every policy on the same lab, the same workloads, the same time.

Mixes of TCG guests under a private libvirtd (--mix, comma-separated):
  trio    three 1 GiB guests (the first benchmark):
            stream  reads a --stream-mib file (default 700 MiB) through its page cache in a loop:
                    a file that fits in the guest is re-read from cache (hot); a larger one
                    streams (cold cache)
            hot     re-reads a 128 MiB file and reports its read throughput (hot cache: demand)
            anon    idles, then allocates --anon-mib of anonymous memory after --anon-after s
          budget 2048 MiB (of 3072)
  sizes4  four guests of different sizes, each hot set a different share of its guest:
            hot768   768 MiB, re-reads 128 MiB (17%)
            hot1536  1536 MiB, re-reads 384 MiB (25%)
            stream   1024 MiB, streams the --stream-mib file
            anon     1280 MiB, idles, then allocates 400 MiB after --anon-after s
          budget 3200 MiB (of 4608, 69%)
  coldcache  three 1 GiB guests whose cache nobody reads again (in-guest reclaim's case,
          docs/policy.md "In-guest reclaim"):
            reader   reads the --stream-mib file once when the run starts, then allocates
                     --anon-mib of anonymous memory --anon-after s into the run
            batch    reads the same file once when the run starts, then idles
            hot      re-reads a 128 MiB file
          budget 2048 MiB (of 3072)
  cal768, cal1536   the calibration mixes (docs/policy.md "Calibration"): one guest per lab
            workload, all of one size, so that each workload can be set beside its model:
            stream   streams the --stream-mib file
            hot      re-reads a quarter of its memory (192 / 384 MiB)
            anon     idles, then allocates 40% of its memory (300 / 600 MiB) after --anon-after s
            idle     does nothing
          budget 62.5% of the guests' total (1920 / 3840 MiB)
  gen:SEED  a generated mix nobody tuned on (bench/lab_mix_gen.py; several: gen:101,gen:102):
            3-5 guests of 512-1536 MiB, each hot (re-reads 10-40% of its memory), stream (a
            2048 MiB file), idle or anon (allocates 20-50% of its memory 20-60% into the run);
            in half the mixes one guest that is not anon also spikes (30-50% of its memory, at
            most 512 MiB, touched at full speed, 40-75% into the run); budget between the
            guests' need (floor, or base + hot set + allocation + kernel reserve) and 85% of
            their total. Deterministic from the seed (and --seconds, which scales the times);
            printed before the runs and stored in every run's JSON ("mix_desc"). Its lab files
            are fixed (stream 2048 MiB, hot 640 MiB: --stream-mib does not apply). Allocations
            are made by bench/lab_mix_hook.sh (the run= hook; it starts the agent too), timed
            from the measured run's start (a go file the bench writes), and their duration is
            recorded (guests.NAME.alloc). Seeds >= 100 are held out for reports: tune nothing
            on them.
--budget-mib overrides a mix's budget. Every guest runs plimsoll-agent (2 s interval) with
--agent=on, none with off, and both modes are run with both (--no-agent is --agent=off). The
agents report over their guests' virtio-serial ports (the packaged default; the guests then have
no network interface); --agent-transport=tcp runs them over QEMU user networking with tokens
instead.

A --policies label is a plimsolld policy (a variant too: "pagecache:burst_window_s=0"), or
pagecache's with "+reclaim" ("pagecache+reclaim"): pagecache with in-guest reclaim,
agent.reclaim_bounds: true (docs/policy.md "In-guest reclaim"); it needs --agent=on.

For each mix, agent mode and repetition (--repeat) it runs an unconstrained baseline (static
policy, no budget) and then each policy, each on a fresh lab for --seconds; samples libvirt's
`actual` and `rss` (QEMU's resident memory) and each guest's heartbeat (meminfo, vmstat, PSI)
every 2 s, and reports:
  reclaimed GiB*s (sum over guests of (max - actual) over time), reclaimed at the end,
  host returned GiB*s (RSS): sum over guests of (its QEMU RSS in the unconstrained run of the
  same repetition at the same second, else that run's median - its RSS), clipped at 0 per
  sample: what the host got back, by the balloon or by in-guest reclaim with free page reporting,
  each hot guest's throughput against its own unconstrained run of the same repetition, PSI
  stall seconds and file refaults per guest, balloon inflate/deflate pages (churn), what the
  agents say they reclaimed and what plimsolld confirmed from QEMU's RSS, OOM kills in any
  guest, time until the guests' total first fits the budget.
With --repeat > 1 the table gives each figure's median over the repetitions and its range.
A second table gives each guest against itself in the unconstrained run of the same repetition
(JSON "vs_unconstrained"): PSI stall and file refaults (the run's, the unconstrained run's, the
difference), a hot guest's throughput change, its allocation's duration, OOM kills. A third, from
bench/lab_limit.py, gives every policy's share of the bound (an oracle's reclaim) and of the
reactive ceiling (what a policy that sees demand --period-s late and keeps only the kernel's
reserve could reclaim); --protect GUEST=MIB sets a hot guest's collapse size for both.

  sudo python3 bench/lab_policy_bench.py --policies=mom,proxmox,pagecache --seconds=150 \
      --out=docs/bench/lab_policy.json
  sudo python3 bench/lab_policy_bench.py --mix=trio,sizes4 --agent=both --repeat=3 \
      --policies=mom,proxmox,pagecache --stream-mib=1536 --out=/tmp/mixes.json
  sudo python3 bench/lab_policy_bench.py --mix=gen:101,gen:102 --repeat=3 \
      --policies=pagecache,mom --out=/tmp/gen.json
  sudo python3 bench/lab_policy_bench.py --mix=trio --agent=on --repeat=3 --stream-mib=1536 \
      --policies=mom,pagecache,pagecache+reclaim --out=/tmp/reclaim_trio.json
  python3 bench/lab_mix_gen.py 101 102     # what those mixes are, without running them

Writes the JSON and a Markdown table (stdout), and one SVG of actual sizes per run.
"""

import argparse
import hashlib
import json
import os
import re
import statistics
import sys
import tempfile
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
sys.path.insert(0, os.path.join(REPO, "bench"))
import harness  # noqa: E402
from harness import MIB  # noqa: E402
import lab_mix_gen  # noqa: E402

# The run= hook of the guests that read or allocate on the measured run's clock (it starts the
# agent too).
MIX_HOOK = os.path.join(REPO, "bench", "lab_mix_hook.sh")

# name: (workload, memory MiB, hot set MiB or None, anonymous MiB allocated later or None).
# A "readonce" guest idles until the measured run starts, then reads the stream file once (and
# allocates, when it does, --anon-after s into the run): bench/lab_mix_hook.sh does both.
MIXES = {
    "trio": {"budget_mib": 2048, "guests": [
        ("stream", "stream", 1024, None, None),
        ("hot", "hot", 1024, 128, None),
        ("anon", "anon", 1024, None, "arg"),  # --anon-mib
    ]},
    "sizes4": {"budget_mib": 3200, "guests": [
        ("hot768", "hot", 768, 128, None),
        ("hot1536", "hot", 1536, 384, None),
        ("stream", "stream", 1024, None, None),
        ("anon", "anon", 1280, None, 400),
    ]},
    "coldcache": {"budget_mib": 2048, "guests": [
        ("reader", "readonce", 1024, None, "arg"),  # --anon-mib
        ("batch", "readonce", 1024, None, None),
        ("hot", "hot", 1024, 128, None),
    ]},
    "cal768": {"budget_mib": 1920, "guests": [
        ("stream", "stream", 768, None, None),
        ("hot", "hot", 768, 192, None),
        ("anon", "anon", 768, None, 300),
        ("idle", "idle", 768, None, None),
    ]},
    "cal1536": {"budget_mib": 3840, "guests": [
        ("stream", "stream", 1536, None, None),
        ("hot", "hot", 1536, 384, None),
        ("anon", "anon", 1536, None, 600),
        ("idle", "idle", 1536, None, None),
    ]},
}


# The heartbeat fields a run keeps (bench/calibrate.py reads them).
BEAT_KEYS = ("uptime", "memtotal_kb", "memfree_kb", "cached_kb", "active_file_kb", "inactive_file_kb",
             "anon_kb", "psi_some_total_us", "workingset_refault_file", "pgmajfault", "balloon_inflate",
             "balloon_deflate", "oom_kill")


# A --policies label's suffix: the policy before it runs with in-guest reclaim, plimsolld's
# agent.reclaim_bounds: true (docs/policy.md "In-guest reclaim").
RECLAIM_SUFFIX = "+reclaim"

# A run's RSS sample is set against the unconstrained run's sample nearest in time when that one
# is at most this many seconds away (a sampling round takes ~2.1 s), else against that run's
# median RSS for the guest.
RSS_ALIGN_S = 1.5

# The figures of plimsolld's Guest.agent.reclaim (proto/plimsoll/v1/types.proto AgentReclaim)
# the bench keeps: what the agent claims it asked and reclaimed, and what QEMU's RSS confirmed.
AGENT_RECLAIM_KEYS = ("claimed_requested_bytes", "claimed_bytes", "confirmed_bytes", "unconfirmed_bytes",
                      "unconfirmed_claims")


def parse_policy_label(label):
    """(plimsolld's policy, in-guest reclaim on) of a --policies label: "pagecache" runs pagecache;
    "pagecache+reclaim" (a variant too: "pagecache:burst_window_s=0+reclaim") runs it with
    agent.reclaim_bounds: true. ValueError for +reclaim on another policy: only pagecache's
    decisions name the working set the bounds keep (server/agent/guest_reclaim_bounds.h), so
    under any other the agents would get bounds that are off."""
    if not label.endswith(RECLAIM_SUFFIX):
        return label, False
    policy = label[:-len(RECLAIM_SUFFIX)]
    if policy.partition(":")[0] != "pagecache":
        raise ValueError("--policies: %r: %s works with pagecache only (pagecache%s): the bounds keep "
                         "the working set its decisions name" % (label, RECLAIM_SUFFIX, RECLAIM_SUFFIX))
    return policy, True


def check_policy_labels(labels, agent_modes):
    """Why --policies cannot run under these agent modes ([True], [False] or both), or None.
    A +reclaim label needs the agents in every run: they do the reclaim."""
    for label in labels:
        try:
            _, reclaim = parse_policy_label(label)
        except ValueError as e:
            return str(e)
        if reclaim and False in agent_modes:
            return ("--policies: %r needs --agent=on: the guests' agents do the reclaim, and with "
                    "--agent=%s some runs have none" % (label, "both" if True in agent_modes else "off"))
    return None


def mix_guests(mix, args):
    """[(name, add_guest kwargs, max bytes)] of a mix."""
    out = []
    for name, workload, mem, hot, anon in MIXES[mix]["guests"]:
        kw = dict(workload=workload, memory_mib=mem)
        if hot is not None:
            kw["hot_mib"] = hot
        anon_mib = args.anon_mib if anon == "arg" else anon
        if workload == "readonce":
            kw.update(workload="idle", readonce=True)
            if anon is not None:
                kw["alloc"] = (anon_mib, args.anon_after)
        elif anon is not None:
            kw.update(anon_mib=anon_mib, anon_after=args.anon_after)
        out.append((name, kw, mem * MIB))
    return out


def mix_hot_mib(mix):
    return max(g[3] or 0 for g in MIXES[mix]["guests"]) or 128


def mix_desc(mix, args):
    """A generated mix's description (bench/lab_mix_gen.py) for a run of --seconds; None for the
    named mixes."""
    seed = lab_mix_gen.parse_seed(mix)
    return None if seed is None else lab_mix_gen.generate(seed, args.seconds)


def lab_spec(mix, args):
    """(guests [(name, add_guest kwargs, max bytes)], stream file MiB, hot file MiB, description
    or None) of a named or a generated mix. A generated guest that allocates has "alloc":
    (MiB, seconds after the measured run's start) in its kwargs, which run_policy turns into the
    run= hook's arguments."""
    desc = mix_desc(mix, args)
    if desc is None:
        return mix_guests(mix, args), args.stream_mib, mix_hot_mib(mix), None
    guests = []
    for g in desc["guests"]:
        kw = dict(workload="idle" if g["kind"] == "anon" else g["kind"], memory_mib=g["memory_mib"])
        if g.get("hot_mib"):
            kw["hot_mib"] = g["hot_mib"]
        if g.get("alloc_mib"):
            kw["alloc"] = (g["alloc_mib"], g["alloc_at_s"])
        guests.append((g["name"], kw, g["memory_mib"] * MIB))
    return guests, desc["stream_file_mib"], desc["hot_file_mib"], desc


def allocation(lines):
    """The guest's first anonymous allocation from its PLIMSOLL-WL lines: {"mib", "start_t",
    "done_t", "seconds"} (t on the workload's own clock), or None when it made none."""
    start = next((w for w in lines if w.get("mode") == "anon" and "allocating_mib" in w), None)
    done = next((w for w in lines if w.get("mode") == "anon" and "allocated_mib" in w), None)
    if start is None and done is None:
        return None
    out = {"mib": (start or done).get("allocating_mib", (done or {}).get("allocated_mib")),
           "start_t": start.get("t") if start else None, "done_t": done.get("t") if done else None}
    out["seconds"] = (out["done_t"] - out["start_t"]) if start and done else None
    return out


def run_policy(policy, args, budget_mib, mix="trio", agent=True, rep=0):
    guests, stream_mib, hot_file_mib, desc = lab_spec(mix, args)
    daemon_policy, in_guest_reclaim = parse_policy_label(policy)
    GUESTS = [g[0] for g in guests]
    maxb = {g[0]: g[2] for g in guests}
    # A variant's name ("pagecache:profile_ratio=1.5") has characters libvirtd's log
    # setting cannot take in a path.
    # A long one would make the lab's socket paths too long for a unix socket (108 bytes).
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", policy)
    if len(name) > 24:
        name = "%s-%s" % (name[:16], hashlib.sha1(policy.encode()).hexdigest()[:8])
    workdir = tempfile.mkdtemp(prefix="plimsoll-bench-%s-" % name)
    # The guests see the host root read-only, but not its /run, /var/tmp and /mnt (tmpfs there).
    go_file = os.path.join(os.path.realpath(workdir), "go")
    if any(go_file.startswith(p) for p in ("/run/", "/var/tmp/", "/mnt/", "/proc/", "/sys/", "/dev/")):
        raise SystemExit("%s: a guest cannot see this path (set TMPDIR to a folder under /tmp)" % go_file)
    keys = harness.AgentKeys(workdir)
    lab = harness.labmod.Lab(state_dir=os.path.join(workdir, "lab"), workload_bin=harness.WORKLOAD,
                             stream_mib=stream_mib, hot_mib=hot_file_mib, flavour=args.flavour)
    daemon = None
    samples = []
    rss_samples = []  # each guest's QEMU RSS (bytes), sampled with `samples`
    agent_reclaim = {}
    try:
        lab.start()
        for name, kw, _ in guests:
            kw = dict(kw)
            alloc = kw.pop("alloc", None)
            readonce = kw.pop("readonce", False)
            if agent and args.agent_transport == "tcp":
                kw.update(keys.guest_kwargs(interval="2s", extra_args=args.agent_arg))
            elif agent:
                kw.update(network=False, **harness.channel_agent(interval="2s", extra_args=args.agent_arg))
            elif desc is not None:
                kw.update(network=False)  # none needed (the named mixes keep the lab's default)
            if alloc or readonce:
                # The hook starts the agent (when the command line has one), then reads and
                # allocates on the measured run's clock.
                kw["run"] = MIX_HOOK
                kw["cmdline_extra"] = " ".join(x for x in (
                    kw.get("cmdline_extra"), "plimsoll.go_file=" + go_file,
                    "plimsoll.readonce=/mnt/data/stream.bin" if readonce else None,
                    "plimsoll.alloc_mib=%d" % alloc[0] if alloc else None,
                    "plimsoll.alloc_after=%d" % alloc[1] if alloc else None) if x)
            lab.add_guest(name, **kw)
        for name in GUESTS:
            lab.wait_ready(name, timeout=120)
        flags = dict(tick=args.tick, stats_period_seconds=1, stale_after="5s", host_reserve_bytes=0,
                     policy=daemon_policy)
        if budget_mib:
            flags["guest_memory_budget_bytes"] = budget_mib * MIB
        for kv in args.daemon_flag:
            k, _, v = kv.partition("=")
            flags[k] = v
        if in_guest_reclaim:
            flags["agent.reclaim_bounds"] = "true"
        if args.keep_logs:
            flags["log_every_decision"] = "true"  # holds too: each guest's steps can be followed
        daemon = harness.Daemon(workdir, lab.uri, agent_keys=keys, **flags)
        t0 = time.monotonic()
        with open(go_file, "w"):  # the hook's reads and allocations count from here
            pass
        first_hb = {n: lab.heartbeat(n) for n in GUESTS}
        first_disk = {n: disk_reads(lab, n) for n in GUESTS}
        while time.monotonic() - t0 < args.seconds:
            t = time.monotonic() - t0
            row = {"t": t}
            rss_row = {"t": t}
            for n in GUESTS:
                try:
                    stat = lab.dommemstat(n)
                    row[n] = stat.get("actual", 0) * 1024
                    rss_row[n] = stat["rss"] * 1024 if "rss" in stat else None
                except Exception:
                    row[n] = rss_row[n] = None  # the guest died
            samples.append(row)
            rss_samples.append(rss_row)
            time.sleep(2)
        last_hb = {}
        last_disk = {}
        for n in GUESTS:
            try:
                last_hb[n] = lab.heartbeat(n)
            except Exception:
                last_hb[n] = None
            last_disk[n] = disk_reads(lab, n)
        wl = {n: lab.workload_lines(n) for n in GUESTS}
        # Every heartbeat of the measured window (2 s apart): the calibration reads the guests'
        # own sizes (kernel, anon, cache) from them.
        beats = {}
        for n in GUESTS:
            try:
                up0 = first_hb[n]["uptime"] if first_hb.get(n) else 0
                beats[n] = [{k: b[k] for k in BEAT_KEYS if k in b}
                            for b in lab.heartbeats(n) if b["uptime"] >= up0]
            except Exception:
                beats[n] = []
        alive = set(lab.domains())
        # An agent run whose agents never reached plimsolld would be an agentless run in disguise.
        agent_reports = harness.metric(daemon.metrics(), "plimsoll_agent_reports_total") or 0
        if agent and agent_reports == 0:
            print("WARNING: %s %s: no agent report reached plimsolld" % (mix, policy), file=sys.stderr)
        if agent:
            try:
                agent_reclaim = {n: agent_reclaim_figures(g) for n, g in daemon.guests()[0].items()}
            except Exception as e:
                print("WARNING: %s %s: no agent reclaim figures from plimsolld: %s" % (mix, policy, e),
                      file=sys.stderr)
        log = daemon.read_log()
        if args.keep_logs:
            os.makedirs(args.keep_logs, exist_ok=True)
            with open(os.path.join(args.keep_logs, "plimsolld-%s-%s-%s-rep%d.log" % (
                    mix, "agent" if agent else "noagent", policy, rep)), "w") as f:
                f.write(log)
    finally:
        if daemon:
            daemon.stop()
        lab.stop()

    dt = 2.0
    reclaimed_gibs = sum((maxb[n] - (row[n] or maxb[n])) * dt for row in samples for n in GUESTS) / (1 << 30)
    end = samples[-1]
    reclaimed_end = sum(maxb[n] - (end[n] or maxb[n]) for n in GUESTS)
    fits = next((row["t"] for row in samples
                 if budget_mib and sum(row[n] or 0 for n in GUESTS) <= budget_mib * MIB), None)
    hot_guests = [g[0] for g in guests if g[1]["workload"] == "hot"]
    hot_mbps_by_guest = {}
    for n in hot_guests:
        series = [w["mbps"] for w in wl[n] if "mbps" in w and w.get("t", 0) > 10]
        hot_mbps_by_guest[n] = statistics.mean(series) if series else None
    # Every reader's throughput (stream guests too): the calibration sets the model's rates from it.
    mbps_by_guest = {}
    for n in GUESTS:
        series = [w["mbps"] for w in wl[n] if "mbps" in w and w.get("t", 0) > 10]
        if series:
            mbps_by_guest[n] = statistics.mean(series)
    # The first benchmark's single hot guest ("hot"), kept under its old keys (a generated mix
    # may have none).
    first_hot = hot_guests[0] if hot_guests else None
    hot_mbps = [w["mbps"] for w in wl[first_hot] if "mbps" in w and w.get("t", 0) > 10] if first_hot else []
    per_guest = {}
    end_rss = rss_samples[-1] if rss_samples else {}
    for n in GUESTS:
        a, b = first_hb.get(n), last_hb.get(n)
        if not a or not b:
            per_guest[n] = {"alive": n in alive}
            if n in agent_reclaim:
                per_guest[n]["agent_reclaim"] = agent_reclaim[n]
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
            "end_rss_mib": end_rss[n] / MIB if end_rss.get(n) is not None else None,
            "reclaimed_gib_s": sum((maxb[n] - (row[n] or maxb[n])) * dt for row in samples) / (1 << 30),
            "heartbeats": beats.get(n, []),
        }
        alloc = allocation(wl[n])
        if alloc:
            per_guest[n]["alloc"] = alloc
        if n in agent_reclaim:
            per_guest[n]["agent_reclaim"] = agent_reclaim[n]
        fd, ld = first_disk.get(n), last_disk.get(n)
        if fd and ld:
            per_guest[n]["disk_read_bytes"] = ld[0] - fd[0]
            per_guest[n]["disk_read_reqs"] = ld[1] - fd[1]
    return {
        "policy": policy,
        "daemon_policy": daemon_policy,
        "in_guest_reclaim": in_guest_reclaim,
        "mix": mix,
        "mix_desc": desc,
        "tick": args.tick,
        "flavour": harness.labmod.lab_flavour(args.flavour),
        "daemon_flags": args.daemon_flag,
        "agent_args": args.agent_arg,
        "agent": agent,
        "agent_transport": args.agent_transport if agent else None,
        "agent_reports": agent_reports,
        "budget_mib": budget_mib,
        "seconds": args.seconds,
        "reclaimed_gib_s": reclaimed_gibs,
        "reclaimed_end_mib": reclaimed_end / MIB,
        "fits_budget_after_s": fits,
        "hot_mbps_mean": statistics.mean(hot_mbps) if hot_mbps else None,
        "hot_mbps_samples": len(hot_mbps),
        # (guest seconds since the workload started, MB/s): where a policy costs throughput.
        "hot_mbps_series": [[w.get("t"), w["mbps"]] for w in wl[first_hot] if "mbps" in w] if first_hot else [],
        "hot_mbps_by_guest": hot_mbps_by_guest,
        "mbps_by_guest": mbps_by_guest,
        "guest_max_mib": {n: maxb[n] / MIB for n in GUESTS},
        "decisions_moved": log.count("direction=inflate") + log.count("direction=deflate"),
        "guests": per_guest,
        "samples": samples,
        "rss_samples": rss_samples,
    }


def agent_reclaim_figures(guest):
    """{AGENT_RECLAIM_KEYS: int, "state": str} of one guest as `plimsollctl guests --json` shows
    it; {} when plimsolld has no agent reclaim for it. Proto JSON leaves zeros out and writes
    64-bit integers as strings."""
    r = (guest.get("agent") or {}).get("reclaim")
    if not r:
        return {}
    out = {k: int(r.get(k, 0)) for k in AGENT_RECLAIM_KEYS}
    out["state"] = r.get("state", "")
    return out


def host_returned_rss(r, base, dt=2.0):
    """Host memory run r's guests gave back, from their QEMU RSS: each guest's RSS in the
    unconstrained run `base` (same mix, agent mode and repetition) minus its RSS in r, clipped at
    0 per guest and sample, each sample counting dt seconds as the reclaimed GiB*s do.
    The unconstrained RSS is base's sample nearest in time when it is at most RSS_ALIGN_S away
    ("aligned"), else base's median RSS for the guest ("median"); "missing" counts the samples
    that count nothing (the guest gone from r, or no RSS for it in base).
    {"gib_s", "by_guest": {guest: GiB*s}, "aligned", "median", "missing"}; None without a base
    or without RSS samples (runs written before the bench sampled RSS)."""
    if not base or not r.get("rss_samples") or not base.get("rss_samples"):
        return None
    guests = list(r["guest_max_mib"])
    base_rows = base["rss_samples"]
    medians = {}
    for n in guests:
        vals = [row[n] for row in base_rows if row.get(n) is not None]
        medians[n] = statistics.median(vals) if vals else None
    by_guest = {n: 0.0 for n in guests}
    counts = {"aligned": 0, "median": 0, "missing": 0}
    for row in r["rss_samples"]:
        near = min(base_rows, key=lambda b: abs(b["t"] - row["t"]))
        close = abs(near["t"] - row["t"]) <= RSS_ALIGN_S
        for n in guests:
            ref = near.get(n) if close else None
            how = "aligned" if ref is not None else "median"
            if ref is None:
                ref = medians[n]
            if row.get(n) is None or ref is None:
                counts["missing"] += 1
                continue
            counts[how] += 1
            by_guest[n] += max(0, ref - row[n]) * dt
    by_guest = {n: v / (1 << 30) for n, v in by_guest.items()}
    return dict(gib_s=sum(by_guest.values()), by_guest=by_guest, **counts)


def disk_reads(lab, name):
    """(bytes, requests) the host has read from the guest's data disk, as libvirt counts them
    (the block stats the bulk stats call returns); None when the guest is gone."""
    try:
        out = lab.virsh("domblkstat", name, "vda", check=True)
    except Exception:
        return None
    vals = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "vda":
            vals[parts[1]] = int(parts[2])
    if "rd_bytes" not in vals or "rd_req" not in vals:
        return None
    return vals["rd_bytes"], vals["rd_req"]


def svg(results, path):
    """Actual guest sizes over time, one panel per run (hand-written SVG, no dependencies)."""
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    w, h, pad = 420, 200, 30
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="11">' % (w * len(results), h + 40)]
    for i, r in enumerate(results):
        x0 = i * w
        names = list(r["guest_max_mib"])
        top = max(r["guest_max_mib"].values()) * MIB
        parts.append('<text x="%d" y="14">%s %s%s (budget %s MiB)</text>' % (
            x0 + pad, r["mix"], r["policy"], "" if r["agent"] else " no agent", r["budget_mib"] or "none"))
        tmax = max(row["t"] for row in r["samples"]) or 1
        for k, n in enumerate(names):
            pts = " ".join("%.1f,%.1f" % (x0 + pad + (w - 2 * pad) * row["t"] / tmax,
                                          20 + h - (h - 20) * (row[n] or 0) / top)
                           for row in r["samples"])
            parts.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>'
                         % (palette[k % len(palette)], pts))
        parts.append('<text x="%d" y="%d">0..%ds, 0..%d MiB; %s</text>' % (
            x0 + pad, h + 35, tmax, top / MIB,
            ", ".join("%s %s" % (n, ["blue", "red", "green", "purple", "orange", "brown"][k % 6])
                      for k, n in enumerate(names))))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def median_range(values, fmt="%.1f"):
    """'median (min..max)' of the values that are there; '-' when none is."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    if len(vals) == 1:
        return fmt % vals[0]
    return (fmt + " (" + fmt + ".." + fmt + ")") % (statistics.median(vals), min(vals), max(vals))


def hot_change(r, base):
    """Each hot guest's mean MB/s against the same guest in the unconstrained run, in percent."""
    out = {}
    for n, v in r.get("hot_mbps_by_guest", {}).items():
        b = base["hot_mbps_by_guest"].get(n) if base else None
        out[n] = 100 * (v / b - 1) if v and b else None
    return out


def vs_unconstrained(r, base):
    """Each guest's harm against itself in the unconstrained run of the same repetition:
    {guest: {"psi_stall_s": [run, unconstrained, difference], "refaults": [...],
    "mbps_change_pct": hot guests' throughput change}}; {} without a base."""
    if not base:
        return {}
    out = {}
    change = hot_change(r, base)
    for n, g in r["guests"].items():
        b = base["guests"].get(n, {})
        d = {}
        for k in ("psi_stall_s", "refaults"):
            v, bv = g.get(k), b.get(k)
            d[k] = [v, bv, v - bv if v is not None and bv is not None else None]
        if n in change:
            d["mbps_change_pct"] = change[n]
        out[n] = d
    return out


def alloc_cell(runs, bases, n):
    """Guest n's allocation time in the runs (seconds from its first page to its last), and in
    the unconstrained runs of the same repetitions; "-" for a guest that allocates nothing."""
    secs = lambda r: ((r or {}).get("guests", {}).get(n, {}).get("alloc") or {}).get("seconds")  # noqa: E731
    got = [secs(r) for r in runs]
    base = [secs(bases.get(r["rep"])) for r in runs]
    if all(v is None for v in got + base):
        return "-"
    return "%s (%s)" % (median_range(got), median_range(base))


def print_harm(results, repeat):
    """Per guest, per policy: stall, refaults and (hot guests) throughput against the guest's own
    unconstrained run of the same repetition, its allocation's duration, OOM kills."""
    groups = {}
    for r in results:
        groups.setdefault((r["mix"], r["agent"]), []).append(r)
    for (mix, agent), rs in groups.items():
        names = list(rs[0]["guest_max_mib"])
        by_policy = {}
        for r in rs:
            if r["budget_mib"] is not None:
                by_policy.setdefault(r["policy"], []).append(r)
        if not by_policy or not any(r.get("vs_unconstrained") for r in rs):
            continue
        bases = {r["rep"]: r for r in rs if r["budget_mib"] is None}
        print("\n%s, %s: each guest against its unconstrained run (same repetition)%s\n" % (
            mix, "agent" if agent else "no agent", ", median (min..max)" if repeat > 1 else ""))
        print("| guest | policy | PSI stall s (unconstrained) | stall +s | file refaults (unconstrained) "
              "| refaults + | MB/s vs unconstrained | allocation s (unconstrained) | OOM kills |")
        print("|---" * 9 + "|")
        for n in names:
            for policy, runs in by_policy.items():
                v = [r.get("vs_unconstrained", {}).get(n, {}) for r in runs]
                cells = [n, policy,
                         "%s (%s)" % (median_range([x.get("psi_stall_s", [None] * 3)[0] for x in v]),
                                      median_range([x.get("psi_stall_s", [None] * 3)[1] for x in v])),
                         median_range([x.get("psi_stall_s", [None] * 3)[2] for x in v], "%+.1f"),
                         "%s (%s)" % (median_range([x.get("refaults", [None] * 3)[0] for x in v], "%.0f"),
                                      median_range([x.get("refaults", [None] * 3)[1] for x in v], "%.0f")),
                         median_range([x.get("refaults", [None] * 3)[2] for x in v], "%+.0f"),
                         median_range([x.get("mbps_change_pct") for x in v], "%+.1f%%"),
                         alloc_cell(runs, bases, n),
                         median_range([r["guests"][n].get("oom_kill") for r in runs], "%.0f")]
                print("| " + " | ".join(cells) + " |")


def print_limits(results, protect, period_s):
    """Every policy's share of bench/lab_limit.py's bound and reactive ceiling."""
    import lab_limit  # here: it imports this module
    if not any(r["policy"] == "static" for r in results):
        print("\n(no unconstrained run: no bound or reactive ceiling)")
        return []
    print("\nThe bound and the reactive ceiling (bench/lab_limit.py), on each run's own samples:")
    return lab_limit.analyse(results, protect, sys.stdout, period_s=period_s)


def print_table(results, repeat):
    """One Markdown table per mix and agent mode; with several repetitions, medians and ranges."""
    groups = {}
    for r in results:
        groups.setdefault((r["mix"], r["agent"]), []).append(r)
    for (mix, agent), rs in groups.items():
        names = list(rs[0]["guest_max_mib"])
        hot = [n for n in rs[0].get("hot_mbps_by_guest", {})]
        print("\n%s, %s, %d repetition(s)%s\n" % (mix, "agent" if agent else "no agent", repeat,
                                                  ": median (min..max)" if repeat > 1 else ""))
        print("| policy | reclaimed GiB*s | x MoM | host returned GiB*s (RSS) | reclaimed at end MiB "
              "| fits budget after s |%s PSI stall s (%s) | file refaults (%s) | balloon inflate / deflate pages "
              "| agent reclaimed MiB (confirmed) | OOM kills |" % (
                  "".join(" %s MB/s vs unconstrained |" % n for n in hot), "/".join(names), "/".join(names)))
        print("|---" * (11 + len(hot)) + "|")
        by_policy = {}
        for r in rs:
            by_policy.setdefault((r["policy"], r["budget_mib"]), []).append(r)
        bases = {r["rep"]: r for r in rs if r["budget_mib"] is None}
        moms = {r["rep"]: r for r in rs if r["policy"] == "mom" and r["budget_mib"] is not None}
        for (policy, budget), runs in by_policy.items():
            g = lambda r, n, k: r["guests"][n].get(k)
            ratio = [r["reclaimed_gib_s"] / moms[r["rep"]]["reclaimed_gib_s"]
                     for r in runs if r["rep"] in moms and moms[r["rep"]]["reclaimed_gib_s"] > 0]
            cells = [policy + ("" if budget else " (no budget)"),
                     median_range([r["reclaimed_gib_s"] for r in runs]),
                     median_range(ratio, "%.2f") if budget else "-",
                     median_range([(r.get("host_returned_rss") or {}).get("gib_s") for r in runs]) if budget else "-",
                     median_range([r["reclaimed_end_mib"] for r in runs], "%.0f"),
                     median_range([r["fits_budget_after_s"] for r in runs], "%.0f")]
            for n in hot:
                cells.append(median_range([hot_change(r, bases.get(r["rep"])).get(n) for r in runs], "%+.1f%%")
                             if budget else median_range([r["hot_mbps_by_guest"].get(n) for r in runs], "%.0f"))
            cells.append("/".join(median_range([g(r, n, "psi_stall_s") for r in runs]) for n in names))
            cells.append("/".join(median_range([g(r, n, "refaults") for r in runs], "%.0f") for n in names))
            cells.append("%s / %s" % tuple(
                median_range([sum(r["guests"][n].get(k, 0) for n in names) for r in runs], "%.0f")
                for k in ("balloon_inflate_pages", "balloon_deflate_pages")))
            cells.append(agent_reclaim_cell(runs, names))
            cells.append(median_range([sum(r["guests"][n].get("oom_kill", 0) for n in names) for r in runs], "%.0f"))
            print("| " + " | ".join(cells) + " |")
        counted = [r["host_returned_rss"] for r in rs if r.get("host_returned_rss") and r["budget_mib"] is not None]
        if counted:
            print("\nhost returned (RSS): each guest's QEMU RSS under its own in the unconstrained run of the same "
                  "repetition, at the same second (nearest sample within %g s) for %d guest samples, at that "
                  "run's median for %d (none near); %d counted nothing (guest gone, or no RSS)." % (
                      RSS_ALIGN_S, sum(c["aligned"] for c in counted), sum(c["median"] for c in counted),
                      sum(c["missing"] for c in counted)))


def agent_reclaim_cell(runs, names):
    """What the agents say they reclaimed in MiB (all guests), and in brackets what plimsolld
    confirmed from QEMU's RSS; "-" when no run has the figures (no agent, or JSON from before)."""
    def total(r, key):
        figs = [r["guests"][n].get("agent_reclaim") for n in names]
        if not any(figs):
            return None
        return sum((f or {}).get(key, 0) for f in figs) / MIB
    claimed = [total(r, "claimed_bytes") for r in runs]
    if all(v is None for v in claimed):
        return "-"
    confirmed = [total(r, "confirmed_bytes") for r in runs]
    return "%s (%s)" % (median_range(claimed, "%.0f"), median_range(confirmed, "%.0f"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", default="mom,proxmox,pagecache",
                    help="comma-separated; pagecache+reclaim: pagecache with in-guest reclaim "
                         "(agent.reclaim_bounds: true; --agent=on only)")
    ap.add_argument("--mix", default="trio", help="comma-separated: " + ", ".join(MIXES)
                    + ", gen:SEED (a generated mix, bench/lab_mix_gen.py)")
    ap.add_argument("--agent", default="on", choices=("on", "off", "both"))
    ap.add_argument("--agent-transport", default="virtio-serial", choices=("virtio-serial", "tcp"),
                    help="how the guests' agents reach plimsolld")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions of every run (medians and ranges)")
    ap.add_argument("--seconds", type=int, default=150)
    ap.add_argument("--budget-mib", type=int, default=None, help="default: the mix's own budget")
    ap.add_argument("--anon-mib", type=int, default=300, help="the trio's anon guest's allocation")
    ap.add_argument("--stream-mib", type=int, default=700,
                    help="size of the streamed file; above the guest's memory it cannot stay cached")
    ap.add_argument("--anon-after", type=int, default=60)
    ap.add_argument("--tick", default="2s")
    ap.add_argument("--daemon-flag", action="append", default=[], metavar="NAME=VALUE",
                    help="an extra plimsolld flag for every run, e.g. balloon_pressure_stats=false")
    ap.add_argument("--agent-arg", action="append", default=[], metavar="--FLAG=VALUE",
                    help="an extra plimsoll-agent flag for every guest, e.g. --reclaim_compact=false")
    ap.add_argument("--flavour", default=None, choices=("stable", "backports"),
                    help="the guests' kernel and QEMU (tests/lab/README.md; default: "
                         "$PLIMSOLL_LAB_FLAVOUR or stable)")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--no-agent", action="store_true", help="guests run no plimsoll-agent (--agent=off)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--protect", action="append", metavar="GUEST=MIB",
                    help="for the bound and the reactive ceiling: the size a hot guest collapses at "
                    "(bench/lab_limit.py --protect; a generated mix's hot guests default to hot set + 140)")
    ap.add_argument("--period-s", type=float, default=2.0,
                    help="the reactive ceiling's report period (bench/lab_limit.py --period-s)")
    ap.add_argument("--keep-logs", default=None, metavar="DIR", help="write each run's plimsolld log here (one file per mix, agent mode, policy and repetition), every decision included")
    args = ap.parse_args()
    mixes = [m for m in args.mix.split(",") if m]
    for m in mixes:
        if m not in MIXES and lab_mix_gen.parse_seed(m) is None:
            sys.exit("unknown mix %r (one of %s, or gen:SEED)" % (m, ", ".join(MIXES)))
        desc = mix_desc(m, args)
        if desc:
            print(lab_mix_gen.describe(desc), flush=True)
    import lab_limit
    protect = lab_limit.parse_protect(args.protect)
    if args.repeat < 1:
        sys.exit("--repeat must be at least 1")
    agent_modes = {"on": [True], "off": [False], "both": [True, False]}["off" if args.no_agent else args.agent]
    policies = [p for p in args.policies.split(",") if p]
    problem = check_policy_labels(policies, agent_modes)
    if problem:
        sys.exit(problem)
    reason = harness.skip_reason()
    if reason:
        sys.exit("cannot run: " + reason)
    results = []
    t0 = time.monotonic()
    for mix in mixes:
        desc = mix_desc(mix, args)
        budget = args.budget_mib or (desc or MIXES.get(mix))["budget_mib"]
        for agent in agent_modes:
            for rep in range(args.repeat):
                plan = ([] if args.no_baseline else [("static", None)]) + [(p, budget) for p in policies]
                base = None
                for policy, b in plan:
                    r = run_policy(policy, args, b, mix=mix, agent=agent, rep=rep)
                    r["rep"] = rep
                    if b is None:
                        base = r
                    r["vs_unconstrained"] = vs_unconstrained(r, base)
                    r["host_returned_rss"] = host_returned_rss(r, base)
                    results.append(r)
                    print("done: %s %s %s rep %d: %.1f GiB*s, host returned %s GiB*s (RSS) (%.0f s so far)" % (
                        mix, "agent" if agent else "no-agent", policy if b else "static (no budget)", rep,
                        r["reclaimed_gib_s"], "%.1f" % r["host_returned_rss"]["gib_s"] if r["host_returned_rss"]
                        else "-", time.monotonic() - t0), file=sys.stderr, flush=True)
    print_table(results, args.repeat)
    print_harm(results, args.repeat)
    print_limits(results, protect, args.period_s)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
        svg(results, os.path.splitext(args.out)[0] + ".svg")
        print("wrote %s and %s" % (args.out, os.path.splitext(args.out)[0] + ".svg"))


if __name__ == "__main__":
    main()
