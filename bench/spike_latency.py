#!/usr/bin/python3
"""Spike latency on real guests: from a sudden allocation inside a guest to plimsolld hearing
about it through the agent's PSI trigger.

Each guest (1 GiB <memory>, ballooned down to --balloon-mib so it has little room) runs the
anon workload, which prints "allocating_mib=" on its console and then touches --anon-mib of
memory; the guest stalls in reclaim, the agent's PSI trigger (some 150 ms per 1 s) fires and it
sends a spike report at once, and plimsolld logs "agent spike uuid=...". Both moments are read
on the host clock: the console line as it appears (polled every 10 ms), the daemon's log line
by its timestamp. Agents report every --interval otherwise (default 5 s), so a spike report is
distinguishable from a periodic one.

  sudo python3 bench/spike_latency.py --guests=3
"""

import argparse
import calendar
import os
import re
import sys
import tempfile
import time

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

LOG_TIME = re.compile(r"^I (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{6})Z .*agent spike uuid=([0-9a-f-]+)")


def spike_times(log_text):
    out = []
    for line in log_text.splitlines():
        m = LOG_TIME.match(line)
        if m:
            t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + int(m.group(2)) / 1e6
            out.append((t, m.group(3)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--guests", type=int, default=3)
    ap.add_argument("--balloon-mib", type=int, default=420)
    ap.add_argument("--anon-mib", type=int, default=330)
    ap.add_argument("--interval", default="5s")
    ap.add_argument("--agent-args", default="", help="extra agent flags, comma separated "
                    "(e.g. --psi_threshold=50ms,--psi_window=500ms)")
    args = ap.parse_args()
    reason = harness.skip_reason()
    if reason:
        sys.exit("cannot run: " + reason)
    workdir = tempfile.mkdtemp(prefix="plimsoll-spike-")
    keys = harness.AgentKeys(workdir)
    lab = harness.labmod.Lab(state_dir=os.path.join(workdir, "lab"), workload_bin=harness.WORKLOAD)
    daemon = None
    results = []
    try:
        lab.start()
        names = ["spike%d" % i for i in range(args.guests)]
        uuids = {}
        for i, n in enumerate(names):
            kw = keys.guest_kwargs(interval=args.interval,
                                   extra_args=("--log_spikes",) + tuple(a for a in args.agent_args.split(",") if a))
            uuids[n] = kw["guest_uuid"]
            # Staggered so that one guest's stall does not overlap the next one's.
            lab.add_guest(n, workload="anon", memory_mib=1024, anon_mib=args.anon_mib,
                          anon_after=40 + 25 * i, **kw)
        for n in names:
            lab.wait_ready(n, timeout=120)
        daemon = harness.Daemon(workdir, lab.uri, agent_keys=keys, policy="static", tick="5s",
                                stats_period_seconds=1, host_reserve_bytes=0)
        for n in names:
            lab.setmem(n, args.balloon_mib)
        for n in names:
            lab.wait_actual(n, args.balloon_mib, timeout=60)
        for n in names:
            t0 = None
            deadline = time.time() + 120
            while time.time() < deadline and t0 is None:
                if "allocating_mib=" in lab.console(n):
                    t0 = time.time()
                else:
                    time.sleep(0.01)
            if t0 is None:
                print("%s: allocation never started" % n)
                continue
            # The agent's "spike sent" console line (--log_spikes) as it appears on the host,
            # with the guest's own trigger-to-send time, splits the figure in two: the guest
            # (allocation start -> stall -> trigger -> send) and the channel (send -> plimsolld).
            sent_before = lab.console(n).count("spike sent seq=")
            t1 = t_sent = None
            trigger_to_send = None
            deadline = time.time() + 20
            while time.time() < deadline and (t1 is None or t_sent is None):
                if t_sent is None:
                    lines = [l for l in lab.console(n).splitlines() if "spike sent seq=" in l]
                    if len(lines) > sent_before:
                        t_sent = time.time()
                        m = re.search(r"trigger_to_send_ms=([\d.]+)", lines[sent_before])
                        trigger_to_send = float(m.group(1)) if m else None
                if t1 is None:
                    later = [t for t, u in spike_times(daemon.read_log()) if u == uuids[n] and t >= t0 - 0.05]
                    t1 = min(later) if later else None
                time.sleep(0.01)
            hb = lab.heartbeat(n)
            results.append((n, t0, t1, t_sent, trigger_to_send, hb))
            print("%s: allocation seen %.3f, spike report at plimsolld %s -> latency %s; agent's spike line on the "
                  "console %s (trigger to send %s ms in the guest); guest psi_some_avg10=%s oom_kill=%s"
                  % (n, t0, "%.3f" % t1 if t1 else "never", "%.0f ms" % ((t1 - t0) * 1000) if t1 else "-",
                     "%+.0f ms after the allocation" % ((t_sent - t0) * 1000) if t_sent else "not seen",
                     trigger_to_send, hb.get("psi_some_avg10"), hb.get("oom_kill")))
    finally:
        if daemon:
            daemon.stop()
        lab.stop()
    lat = sorted((t1 - t0) * 1000 for _, t0, t1, _, _, _ in results if t1)
    print("spike latency: %d of %d allocations produced a spike report; ms: %s" % (
        len(lat), len(results), ", ".join("%.0f" % x for x in lat)))
    for n, t0, t1, t_sent, tts, _ in results:
        if t1 and t_sent and tts is not None:
            trigger = t_sent - tts / 1000
            print("%s: allocation start -> trigger %.0f ms, trigger -> sent %.1f ms (guest clock), "
                  "console line -> plimsolld %+.0f ms, trigger -> plimsolld %.0f ms" % (
                      n, (trigger - t0) * 1000, tts, (t1 - t_sent) * 1000, (t1 - trigger) * 1000))


if __name__ == "__main__":
    main()
