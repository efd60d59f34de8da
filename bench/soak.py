#!/usr/bin/python3
"""Soak: plimsolld with three real guests and their agents for --minutes; is it still sound?

The lab is the demo's: a private libvirtd with three 1 GiB TCG guests, each running
plimsoll-agent (2 s interval):
  stream  reads a 700 MiB file through its page cache in a loop
  hot     re-reads a 128 MiB file
  anon    idles, then allocates 400 MiB after 60 s and keeps it
plimsolld runs --policy (default `pagecache`) with
a guest budget (--budget-mib, 2048 MiB) under the guests' 3072 MiB, at --tick (1 s: more ticks
per minute than the 5 s default).

Every --sample-seconds (10 s) it records
  plimsolld: VmRSS, VmHWM, CPU% (utime+stime over the interval), open fds, threads
  /metrics:  agent reports accepted/rejected, libvirt errors, decisions by direction,
             guests by state, mean tick duration; per guest target, actual, agent connected,
             balloon state
  the log:   warning and error lines, every balloon move (decision lines that are not holds)
  guests:    oom_kill from each guest's heartbeat, whether the domain is still running
and at the end reports the three criteria of a soak:
  leak   RSS slope over the second half (least squares, KiB/min), fds and threads first vs last
  drift  balloon moves per minute per guest and per window, direction reversals (a target
         that goes down, up, down... oscillates; one that stops moving has settled), the
         range of each guest's target over the second half
  settle reversals per guest per window; the criterion: after the first window (the
         anon guest's allocation is in it) no guest reverses more than once per window
  error  warning/error log lines by message, libvirt errors, rejected reports, OOM kills,
         guests lost, agent disconnections

  sudo python3 bench/soak.py --minutes=35 --out=docs/bench/soak_pagecache_law.json
      # the recorded run's file, named after the policy's deprecated name

Writes the JSON (every sample included) and, beside it, NAME_rss.svg for NAME.json (RSS over
time, with the guests' targets below). Progress goes to stdout, one line per sample; Ctrl-C (or SIGTERM)
ends the run early and still writes the results.
"""

import argparse
import calendar
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402
from harness import MIB  # noqa: E402

GUESTS = [("stream", dict(workload="stream")), ("hot", dict(workload="hot")),
          ("anon", dict(workload="anon", anon_mib=400, anon_after=60))]
NAMES = [n for n, _ in GUESTS]
CLK_TCK = os.sysconf("SC_CLK_TCK")

# "W 2026-11-30T07:27:27.123456Z file.cc:12] message" (common/log.h)
LOG_RE = re.compile(r"^([IWE]) (\S+) (\S+:\d+)\] (.*)$")
DECISION_RE = re.compile(r"decision tick=\d+ guest=(?P<guest>\S+) uuid=(?P<uuid>\S+) .*?direction=(?P<dir>\w+) "
                         r"prev_target=(?P<prev>[\d.]+)MiB target=(?P<target>[\d.]+)MiB actual=(?P<actual>[\d.]+)MiB")
# daemon.cc and agent_service.cc: a spike report that wakes the loop, an agent's stream opening or closing
AGENT_EVENT_RE = re.compile(r"agent (spike|connected|disconnected) uuid=([0-9a-f-]+)")
METRIC_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")
LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


# ---- readers -------------------------------------------------------------------------

KEPT_KEYS = ("guest", "reason")


def message_key(level, where, msg):
    """A log line without its values, so that lines of one kind count together; the guest's
    name and a reason stay, to tell which guest a warning is about and why."""
    return "%s %s] %s" % (level, where, re.sub(r'(\w+)=("[^"]*"|\S+)',
                                               lambda m: m.group(0) if m.group(1) in KEPT_KEYS else m.group(1) + "=...",
                                               msg))


def log_time(stamp):
    """Unix time of a log line's "2026-11-30T07:32:42.147452Z"."""
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + stamp[19:].rstrip("Z"))


def read_proc(pid):
    """plimsolld's own figures from /proc: RSS, HWM (KiB), threads, fds, CPU ticks."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k.lower() + "_kib"] = int(v.split()[0])
            elif k == "Threads":
                out["threads"] = int(v)
    out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    with open("/proc/%d/stat" % pid) as f:
        # The command name may hold spaces; the fields after its ')' are fixed.
        fields = f.read().rsplit(")", 1)[1].split()
    out["cpu_ticks"] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def parse_metrics(text):
    """Prometheus text format as [(name, {label: value}, float)]."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = METRIC_RE.match(line)
        if not m:
            continue
        labels = dict(LABEL_RE.findall(m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            pass
    return out


def summarize_metrics(series):
    """The figures a soak watches, from one scrape."""
    s = {"reports_accepted": 0.0, "reports_rejected": {}, "libvirt_errors": {}, "decisions": {},
         "guests_by_state": {}, "tick_sum_s": 0.0, "tick_count": 0.0, "libvirt_connected": None,
         "guest": {n: {} for n in NAMES}}
    for name, labels, v in series:
        dom = labels.get("domain")
        g = s["guest"].get(dom) if dom else None
        if name == "plimsoll_agent_reports_total":
            s["reports_accepted"] += v
        elif name == "plimsoll_agent_reports_rejected_total":
            s["reports_rejected"][labels.get("reason", "?")] = v
        elif name == "plimsoll_libvirt_errors_total":
            s["libvirt_errors"][labels.get("operation", "?")] = v
        elif name == "plimsoll_decisions_total":
            s["decisions"][labels.get("direction", "?")] = v
        elif name == "plimsoll_guests":
            s["guests_by_state"][labels.get("state", "?")] = v
        elif name == "plimsoll_tick_duration_seconds_sum":
            s["tick_sum_s"] = v
        elif name == "plimsoll_tick_duration_seconds_count":
            s["tick_count"] = v
        elif name == "plimsoll_libvirt_connected":
            s["libvirt_connected"] = v
        elif g is not None:
            if name == "plimsoll_guest_balloon_target_bytes":
                g["target_mib"] = v / MIB
            elif name == "plimsoll_guest_balloon_actual_bytes":
                g["actual_mib"] = v / MIB
            elif name == "plimsoll_guest_agent_connected":
                g["agent_connected"] = int(v)
            elif name == "plimsoll_guest_state" and v == 1:
                g["state"] = labels.get("state")
            elif name == "plimsoll_guest_managed":
                g["managed"] = int(v)
    return s


FOLLOWER_FIELDS = ("wall0", "lines", "messages", "examples", "moves", "names", "agent_events")


class LogFollower:
    """Reads the daemon's log as it grows: warning/error lines and balloon moves."""

    def __init__(self, path, wall0):
        self.path = path
        self.wall0 = wall0  # unix time of t = 0
        self.offset = 0
        self.partial = b""
        self.lines = {"I": 0, "W": 0, "E": 0}
        self.messages = {}  # "W file:line] message with values elided" -> count
        self.examples = {}  # the same key -> the first such line
        self.moves = []     # (t, guest, direction, prev_target_mib, target_mib, actual_mib)
        self.names = {}     # uuid -> guest name, from the decision lines
        self.agent_events = []  # (t, uuid, "spike" | "connected" | "disconnected")

    def to_json(self):
        return {k: getattr(self, k) for k in FOLLOWER_FIELDS}

    @classmethod
    def from_json(cls, d):
        f = cls(None, 0)
        for k in FOLLOWER_FIELDS:
            setattr(f, k, d[k])
        return f

    def poll(self):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        data = self.partial + data
        *full, self.partial = data.split(b"\n")
        for raw in full:
            line = raw.decode("utf-8", errors="replace")
            m = LOG_RE.match(line)
            if not m:
                continue  # gRPC or libvirt text that is not ours; counted nowhere
            level, stamp, where, msg = m.groups()
            self.lines[level] += 1
            if level in ("W", "E"):
                key = message_key(level, where, msg)
                self.messages[key] = self.messages.get(key, 0) + 1
                self.examples.setdefault(key, line[:400])
            a = AGENT_EVENT_RE.match(msg)
            if a:
                self.agent_events.append((round(log_time(stamp) - self.wall0, 2), a.group(2), a.group(1)))
            d = DECISION_RE.search(msg) if level == "I" else None
            if d:
                self.names[d["uuid"]] = d["guest"]
            if d and d["dir"] in ("inflate", "deflate"):
                self.moves.append((round(log_time(stamp) - self.wall0, 2), d["guest"], d["dir"],
                                   float(d["prev"]), float(d["target"]), float(d["actual"])))


def guest_tail(lab, name, nbytes=16384):
    """The last complete heartbeat of a guest, from the tail of its console file only
    (the whole file grows by ~12 KiB a minute; the sampler should not cost more than it measures)."""
    try:
        with open(lab.console_path(name), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - nbytes))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    beats = harness.labmod.parse_heartbeats(text)
    return beats[-1] if beats else None


def console_log(lab, name):
    """What the agent (and the workload) said on a guest's console: every log line of the agent
    (it logs on change only: connections, acceptance, rejections, sample errors) counted by
    message, the lines themselves (the first 200), and the workload's error lines."""
    counts, lines = {}, []
    for line in lab.console(name).splitlines():
        line = line.strip("\r")
        m = LOG_RE.match(line)
        if m:
            key = message_key(m.group(1), m.group(3), m.group(4))
        elif "error=" in line and line.startswith("PLIMSOLL-"):
            key = line.strip()[:200]
        else:
            continue
        counts[key] = counts.get(key, 0) + 1
        if len(lines) < 200:
            lines.append(line[:300])
    return {"by_message": counts, "lines": lines}


# ---- analysis ------------------------------------------------------------------------

def linear_fit(xs, ys):
    """Least-squares slope and intercept."""
    n = len(xs)
    if n < 2:
        return 0.0, ys[0] if ys else 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def reversals(directions):
    """How often consecutive moves of one guest change direction (inflate <-> deflate)."""
    return sum(1 for a, b in zip(directions, directions[1:]) if a != b)


def reversals_per_window(moves, window_s, t_end):
    """Reversals per window, each counted in the window of the move that turned."""
    counts = [0] * (int(t_end // window_s) + 1)
    for prev, move in zip(moves, moves[1:]):
        if move[2] != prev[2]:
            counts[min(int(move[0] // window_s), len(counts) - 1)] += 1
    return counts


def analyse(samples, follower, t_end, args):
    half = t_end / 2
    second = [s for s in samples if s["t"] >= half]
    xs = [s["t"] / 60 for s in second]
    rss_slope, rss_icpt = linear_fit(xs, [s["vmrss_kib"] for s in second])
    all_slope, _ = linear_fit([s["t"] / 60 for s in samples], [s["vmrss_kib"] for s in samples])
    cpu = [s["cpu_pct"] for s in samples if s.get("cpu_pct") is not None]
    first, last = samples[0], samples[-1]
    # The first sample is taken as the daemon starts, before agents connect and gRPC spins up
    # its threads; "warm" is the first sample a minute in.
    warm = next((s for s in samples if s["t"] >= 60), first)
    totals = [sum(s["metrics"]["guest"][n].get("actual_mib", 0) for n in NAMES) for s in samples]
    target_totals = [sum(s["metrics"]["guest"][n].get("target_mib", 0) for n in NAMES) for s in samples]
    total_cpu_s = (last["cpu_ticks"] - first["cpu_ticks"]) / CLK_TCK
    wall = last["t"] - first["t"]

    minutes = t_end / 60
    window_s = args.window_minutes * 60
    uuid_of = {name: uuid for uuid, name in follower.names.items()}
    drift = {}
    for n in NAMES:
        mine = [e for e in follower.agent_events if e[1] == uuid_of.get(n)]
        events = {kind: sum(1 for e in mine if e[2] == kind) for kind in ("spike", "connected", "disconnected")}
        spikes_per_window = [sum(1 for e in mine if e[2] == "spike" and k * window_s <= e[0] < (k + 1) * window_s)
                             for k in range(int(t_end // window_s) + 1)]
        moves = [m for m in follower.moves if m[1] == n]
        moves2 = [m for m in moves if m[0] >= half]
        targets2 = [s["metrics"]["guest"][n].get("target_mib") for s in second]
        targets2 = [x for x in targets2 if x is not None]
        actual2 = [s["metrics"]["guest"][n].get("actual_mib") for s in second]
        actual2 = [x for x in actual2 if x is not None]
        gaps = [abs(s["metrics"]["guest"][n]["target_mib"] - s["metrics"]["guest"][n]["actual_mib"])
                for s in second if "target_mib" in s["metrics"]["guest"][n]
                and "actual_mib" in s["metrics"]["guest"][n]]
        per_window = [sum(1 for m in moves if k * window_s <= m[0] < (k + 1) * window_s)
                      for k in range(int(t_end // window_s) + 1)]
        drift[n] = {
            "moves": len(moves),
            "moves_per_min": len(moves) / minutes if minutes else 0,
            "moves_second_half": len(moves2),
            "moves_per_min_second_half": len(moves2) / (minutes / 2) if minutes else 0,
            "moves_per_window": per_window,
            "reversals": reversals([m[2] for m in moves]),
            "reversals_second_half": reversals([m[2] for m in moves2]),
            "reversals_per_window": reversals_per_window(moves, window_s, t_end),
            "last_move_t": moves[-1][0] if moves else None,
            "target_mib_second_half": [min(targets2), max(targets2)] if targets2 else None,
            "actual_mib_second_half": [min(actual2), max(actual2)] if actual2 else None,
            "max_target_actual_gap_mib_second_half": max(gaps) if gaps else None,
            "target_mib_end": last["metrics"]["guest"][n].get("target_mib"),
            "actual_mib_end": last["metrics"]["guest"][n].get("actual_mib"),
            "agent_spike_reports": events["spike"],
            "agent_spike_reports_per_window": spikes_per_window,
            "agent_streams_opened": events["connected"],
            "agent_streams_closed": events["disconnected"],
            "agent_connected_samples": sum(1 for s in samples if s["metrics"]["guest"][n].get("agent_connected") == 1),
            "states_seen": sorted({s["metrics"]["guest"][n].get("state") or "-" for s in samples}),
            "oom_kill_end": (last["guests"].get(n) or {}).get("oom_kill"),
            "running_end": n in last["running"],
        }
    m0, m1 = first["metrics"], last["metrics"]
    tick_n = m1["tick_count"] - m0["tick_count"]
    return {
        "minutes": round(minutes, 2),
        "samples": len(samples),
        "warm_t": warm["t"],
        "rss_kib": {"start": first["vmrss_kib"], "warm": warm["vmrss_kib"], "end": last["vmrss_kib"],
                    "max": max(s["vmrss_kib"] for s in samples), "min": min(s["vmrss_kib"] for s in samples),
                    "hwm_end": last["vmhwm_kib"],
                    "slope_kib_per_min_second_half": round(rss_slope, 3),
                    "intercept_kib_second_half": round(rss_icpt, 1),
                    "slope_kib_per_min_whole_run": round(all_slope, 3)},
        "cpu": {"mean_pct": round(total_cpu_s / wall * 100, 2) if wall else None,
                "max_interval_pct": round(max(cpu), 2) if cpu else None,
                "total_cpu_s": round(total_cpu_s, 2)},
        "fds": {"first": first["fds"], "warm": warm["fds"], "last": last["fds"],
                "max": max(s["fds"] for s in samples)},
        "threads": {"first": first["threads"], "warm": warm["threads"], "last": last["threads"],
                    "max": max(s["threads"] for s in samples)},
        "ticks": {"count": tick_n, "mean_ms": round((m1["tick_sum_s"] - m0["tick_sum_s"]) / tick_n * 1000, 3)
                  if tick_n else None},
        "log_lines": follower.lines,
        "warnings_errors_by_message": dict(sorted(follower.messages.items(), key=lambda kv: -kv[1])),
        "warning_error_examples": follower.examples,
        "libvirt_errors": m1["libvirt_errors"],
        "reports_accepted": m1["reports_accepted"],
        "reports_accepted_per_s": round((m1["reports_accepted"] - m0["reports_accepted"]) / wall, 3) if wall else None,
        "reports_rejected": m1["reports_rejected"],
        "decisions_total": m1["decisions"],
        "guests_by_state_end": m1["guests_by_state"],
        # Targets are what the policy decides; actual sizes lag them while balloons move.
        "guests_target_total_mib_max": round(max(target_totals), 1),
        "guests_actual_total_mib_max": round(max(totals), 1),
        "budget_mib": args.budget_mib,
        "oom_kills_total": sum((last["guests"].get(n) or {}).get("oom_kill", 0) for n in NAMES),
        "load_avg": {"first": first["loadavg"], "last": last["loadavg"],
                     "mean_1min": round(sum(s["loadavg"][0] for s in samples) / len(samples), 2)},
        "guests": drift,
        # After the first window, at most one reversal per guest per window.
        "settle": {n: max(drift[n]["reversals_per_window"][1:], default=0) for n in NAMES},
        "settled": all(max(drift[n]["reversals_per_window"][1:], default=0) <= 1 for n in NAMES),
    }


def write_svg(samples, fit, path):
    """RSS and HWM over time with the second-half fit, and each guest's target below
    (hand-written SVG, no dependencies)."""
    w, h1, h2, padl, padr = 760, 220, 160, 60, 20
    tmax = max(s["t"] for s in samples) or 1
    rss = [s["vmrss_kib"] / 1024 for s in samples]
    hwm = [s["vmhwm_kib"] / 1024 for s in samples]
    # Zoomed to the figures (a whole MiB either side), so that a slow climb is visible.
    lo, hi = max(0, int(min(rss)) - 1), int(max(hwm + rss)) + 2
    x = lambda t: padl + (w - padl - padr) * t / tmax  # noqa: E731
    y1 = lambda v: 30 + h1 - h1 * (v - lo) / (hi - lo)  # noqa: E731
    y2 = lambda v: 60 + h1 + h2 - h2 * v / 1024  # noqa: E731
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11">' % (w, h1 + h2 + 100),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="16" font-size="13">plimsolld RSS over a %.0f-minute soak (3 real guests, tick %s)'
           '</text>' % (padl, tmax / 60, fit["tick"])]
    for frac in (0, 0.25, 0.5, 0.75, 1):
        v = lo + (hi - lo) * frac
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (padl, w - padr, y1(v), y1(v)))
        out.append('<text x="4" y="%.1f">%.1f MiB</text>' % (y1(v) + 4, v))
    for vals, color, label in ((rss, "#1f77b4", "VmRSS"), (hwm, "#999", "VmHWM")):
        pts = " ".join("%.1f,%.1f" % (x(s["t"]), y1(v)) for s, v in zip(samples, vals))
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (color, pts))
    t0 = tmax / 2
    out.append('<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#d62728" stroke-dasharray="4,3"/>' % (
        x(t0), x(tmax), y1((fit["icpt"] + fit["slope"] * t0 / 60) / 1024),
        y1((fit["icpt"] + fit["slope"] * tmax / 60) / 1024)))
    out.append('<text x="%d" y="%d">VmRSS blue, VmHWM grey, red dashed: least-squares fit over the second half '
               '(%+.2f KiB/min)</text>' % (padl, h1 + 46, fit["slope"]))
    colors = {"stream": "#1f77b4", "hot": "#d62728", "anon": "#2ca02c"}
    for frac in (0, 0.5, 1):
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (
            padl, w - padr, y2(1024 * frac), y2(1024 * frac)))
        out.append('<text x="4" y="%.1f">%d MiB</text>' % (y2(1024 * frac) + 4, 1024 * frac))
    for n in NAMES:
        pts = " ".join("%.1f,%.1f" % (x(s["t"]), y2(s["metrics"]["guest"][n]["target_mib"]))
                       for s in samples if "target_mib" in s["metrics"]["guest"][n])
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (colors[n], pts))
    out.append('<text x="%d" y="%d">balloon targets: stream blue, hot red, anon green; 0..%.0f min</text>' % (
        padl, h1 + h2 + 80, tmax / 60))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---- the run -------------------------------------------------------------------------

class Stop(Exception):
    pass


def _raise_stop(_sig, _frame):
    raise Stop()


def git_commit():
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--tick", default="1s")
    ap.add_argument("--budget-mib", type=int, default=2048)
    ap.add_argument("--policy", default="pagecache", help="plimsolld's policy (a spec: name[:k=v...])")
    ap.add_argument("--sample-seconds", type=float, default=10)
    ap.add_argument("--window-minutes", type=float, default=5, help="window for moves per window")
    ap.add_argument("--out", help="default docs/bench/soak_<policy>.json; with --reanalyse, the JSON reanalysed")
    ap.add_argument("--reanalyse", metavar="JSON",
                    help="no run: recompute the summary (and the SVG) of an earlier run's JSON into --out")
    args = ap.parse_args()
    if args.reanalyse:
        # Into the file it came from unless told otherwise: a reanalysis of an old run once
        # overwrote the kept soak.json of another.
        args.out = args.out or args.reanalyse
        return reanalyse(args)
    # Named by its policy, so that a run of one policy never overwrites another's kept run.
    policy_name = re.sub(r"[^A-Za-z0-9_]", "_", args.policy.split(":")[0])
    args.out = args.out or os.path.join(REPO, "docs", "bench", "soak_%s.json" % policy_name)
    reason = harness.skip_reason()
    if reason:
        sys.exit("cannot run: " + reason)
    signal.signal(signal.SIGTERM, _raise_stop)

    workdir = tempfile.mkdtemp(prefix="plimsoll-soak-")
    print("soak: state in %s" % workdir, flush=True)
    keys = harness.AgentKeys(workdir)
    lab = harness.labmod.Lab(state_dir=os.path.join(workdir, "lab"), workload_bin=harness.WORKLOAD)
    daemon = None
    samples = []
    follower = None
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    commit = git_commit()  # now: the checkout may move while the run goes on
    stopped_early = False
    try:
        lab.start()
        for name, kw in GUESTS:
            lab.add_guest(name, memory_mib=1024, **kw, **keys.guest_kwargs(interval="2s"))
        for name in NAMES:
            lab.wait_ready(name, timeout=180)
        flags = dict(tick=args.tick, policy=args.policy, host_reserve_bytes=0,
                     guest_memory_budget_bytes=args.budget_mib * MIB,
                     state_file=os.path.join(workdir, "control-state.textproto"))
        daemon = harness.Daemon(workdir, lab.uri, agent_keys=keys, **flags)
        pid = daemon.proc.pid
        t0 = time.monotonic()
        follower = LogFollower(daemon.log_path, time.time())
        prev = None
        k = 0
        while True:
            t = time.monotonic() - t0
            if daemon.proc.poll() is not None:
                print("soak: plimsolld exited %s" % daemon.proc.returncode, flush=True)
                break
            row = {"t": round(t, 2), "loadavg": loadavg()}
            row.update(read_proc(pid))
            if prev:
                dt = t - prev["t"]
                row["cpu_pct"] = round((row["cpu_ticks"] - prev["cpu_ticks"]) / CLK_TCK / dt * 100, 2)
            try:
                row["metrics"] = summarize_metrics(parse_metrics(daemon.metrics()))
            except OSError as e:
                row["metrics"] = summarize_metrics([])
                row["metrics_error"] = str(e)
            follower.poll()
            row["log_w"], row["log_e"] = follower.lines["W"], follower.lines["E"]
            row["moves"] = len(follower.moves)
            row["guests"] = {n: (lambda hb: {"oom_kill": hb["oom_kill"], "uptime": hb["uptime"],
                                             "memavail_mib": hb["memavail_kb"] // 1024} if hb else None)(
                                 guest_tail(lab, n)) for n in NAMES}
            try:
                row["running"] = sorted(lab.domains())
            except harness.labmod.LabError as e:
                row["running"] = []
                row["domains_error"] = str(e)[:200]
            samples.append(row)
            prev = row
            g = row["metrics"]["guest"]
            print("t=%5.0fs rss=%dKiB hwm=%dKiB cpu=%s%% fds=%d thr=%d load=%.2f W=%d E=%d moves=%d reports=%d "
                  "rej=%d lverr=%d %s" % (
                      t, row["vmrss_kib"], row["vmhwm_kib"], row.get("cpu_pct", "-"), row["fds"], row["threads"],
                      row["loadavg"][0], row["log_w"], row["log_e"], row["moves"],
                      row["metrics"]["reports_accepted"], sum(row["metrics"]["reports_rejected"].values()),
                      sum(row["metrics"]["libvirt_errors"].values()),
                      " ".join("%s=%s/%s%s%s" % (n, int(g[n].get("target_mib", -1)), int(g[n].get("actual_mib", -1)),
                                                 "" if g[n].get("agent_connected") == 1 else "(noagent)",
                                                 "" if g[n].get("state") in (None, "ok") else "(%s)" % g[n]["state"])
                               for n in NAMES)), flush=True)
            if t >= args.minutes * 60:
                break
            k += 1
            time.sleep(max(0.0, t0 + k * args.sample_seconds - time.monotonic()))
    except (Stop, KeyboardInterrupt):
        stopped_early = True
        print("soak: stopped early; writing what was sampled", flush=True)
    finally:
        agent_log = {n: console_log(lab, n) for n in NAMES}
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        rc = daemon.stop() if daemon else None
        lab.stop()
    if follower:
        follower.poll()
    if len(samples) < 3:
        sys.exit("soak: too few samples (%d) to say anything" % len(samples))

    result = {
        "commit": commit,
        "started": started,
        "args": vars(args),
        "daemon_args": daemon.args[1:],
        "daemon_exit": rc,
        "stopped_early": stopped_early,
        "guest_console_log": agent_log,
        "log": follower.to_json(),
        "samples": samples,
    }
    return write_results(result, args)


def compact(sample):
    """A sample without the zero counters and with sizes to 0.1 MiB, so a 35-minute run stays a
    file one can keep in the repository. Idempotent."""
    m = sample["metrics"]
    for k in ("reports_rejected", "guests_by_state", "libvirt_errors"):
        m[k] = {r: v for r, v in m[k].items() if v}
    for g in m["guest"].values():
        for k in ("target_mib", "actual_mib"):
            if k in g:
                g[k] = round(g[k], 1)
    return sample


def write_results(result, args):
    """Summarises a run (kept in `result`) and writes the JSON and the SVG beside it."""
    samples = [compact(s) for s in result["samples"]]
    result["samples"] = samples
    summary = analyse(samples, LogFollower.from_json(result["log"]), samples[-1]["t"], args)
    summary["guest_agent_log_by_message"] = {n: result["guest_console_log"][n]["by_message"] for n in NAMES}
    result["summary"] = summary
    result["summary_args"] = {"window_minutes": args.window_minutes, "budget_mib": args.budget_mib}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, separators=(",", ":"))
    # soak_X.json -> soak_X_rss.svg
    svg_path = re.sub(r"\.json$", "", os.path.abspath(args.out)) + "_rss.svg"
    write_svg(samples, {"slope": summary["rss_kib"]["slope_kib_per_min_second_half"],
                        "icpt": summary["rss_kib"]["intercept_kib_second_half"],
                        "tick": result["args"]["tick"]}, svg_path)
    print(json.dumps({k: v for k, v in summary.items() if k != "warning_error_examples"}, indent=1))
    print("soak: wrote %s and %s" % (args.out, svg_path))
    return 0


def reanalyse(args):
    with open(args.reanalyse) as f:
        result = json.load(f)
    args.budget_mib = result["args"]["budget_mib"]
    return write_results(result, args)


if __name__ == "__main__":
    sys.exit(main())
