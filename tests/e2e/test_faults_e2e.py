#!/usr/bin/python3
"""Faults on real QEMU guests.

One lab for the class (private libvirtd, 1 GiB TCG guests) and plimsolld under the default
`pagecache` policy with tick=1s, stats every 1 s, stale_after=5s and an explicit state file.
The tests run in order and build on each other:
  1. libvirtd SIGKILLed mid-run and restarted: plimsolld keeps serving, shows the connection
     down, changes nothing while it is, reconnects by itself, keeps the guests, and shrinks
     nothing before their stats are proven fresh again;
  2. a guest destroyed while plimsolld inflates its balloon: it leaves the API and the metrics,
     the others stay managed, libvirt errors stay bounded;
  3. a guest without a balloon device: reported no-balloon, never pushed; 3b (expected failure,
     a daemon bug): plimsolld retries enabling its stats every tick, one error and one warning
     line per tick, forever;
  4. a guest with autodeflate pinned small that allocates more than it has: it deflates
     itself instead of OOM-killing, and plimsolld shows it as self_deflated;
  5. plimsolld SIGKILLed and restarted on the same state file: the override is intact, the
     balloons are adopted where they are, and nothing moves in the first seconds;
  6. the guest budget lowered well below what the guests hold: reclaim in bounded steps, no
     guest under its floor, no OOM kill anywhere.
  7. a guest without an agent or autodeflate held by a Reclaim, then allocating in steps: the
     hold ends on the hard demand libvirt shows, before any OOM kill.
"""

import datetime
import json
import os
import re
import signal
import tempfile
import time
import unittest

import harness
from harness import MIB, wait_for

ROOM_MIB = 8192  # a budget with room for every guest
ALLOC_STEPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alloc_steps.sh")
FLAGS = dict(tick="1s", stats_period_seconds=1, stale_after="5s", host_reserve_bytes=0,
             policy="pagecache", **{"line.offer_hold": "2s"})
STALE_AFTER_S = 5.0
# docs/policy.md, "Host": the budget takes at most step_fraction of a guest's ceiling per decision.
STEP_FRACTION = 0.25
# Decision lines print sizes with one decimal.
ROUNDING_MIB = 0.2

DECISION_RE = re.compile(
    r"^I (?P<ts>\S+) control_loop\.cc:\d+\] decision tick=(?P<tick>\d+) guest=(?P<guest>\S+) uuid=\S+ "
    r"policy=\S+ direction=(?P<direction>\w+) prev_target=(?P<prev>[\d.]+)MiB target=(?P<target>[\d.]+)MiB "
    r"actual=(?P<actual>[\d.]+)MiB max=(?P<max>[\d.]+)MiB min=(?P<min>[\d.]+)MiB .* "
    r"stats_age=(?P<age>[\d.]+)s applied=(?P<applied>[\w-]+) reason=\"(?P<reason>.*)\"$")


def log_time(ts):
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")


def decisions(log_text, start_line=0):
    """Decision lines of a plimsolld log as dicts (sizes in MiB), with their line numbers."""
    out = []
    for no, line in enumerate(log_text.splitlines()):
        if no < start_line:
            continue
        m = DECISION_RE.match(line)
        if not m:
            continue
        d = m.groupdict()
        for k in ("prev", "target", "actual", "max", "min", "age"):
            d[k] = float(d[k])
        d["tick"] = int(d["tick"])
        # "in-flight": the move was handed to the balloon call pool; its
        # result lands on a later tick. For these tests it is a move issued.
        d["applied"] = d["applied"] in ("true", "in-flight")
        d["line"] = no
        d["time"] = log_time(d["ts"])
        out.append(d)
    return out


def line_numbers(log_text, needle):
    return [no for no, line in enumerate(log_text.splitlines()) if needle in line]


def metric_values(text, name, **labels):
    """Values of the samples of `name` whose labels include `labels`."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            out.append(float(m.group(3)))
    return out


def mib(v):
    return int(v) / MIB


@unittest.skipIf(harness.skip_reason(), harness.skip_reason())
class FaultsE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.t_class = time.monotonic()
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-faults-e2e-")
        cls.state_file = os.path.join(cls.workdir, "plimsolld-state.textproto")
        cls.keys = harness.AgentKeys(cls.workdir)
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"), workload_bin=harness.WORKLOAD)
        cls.lab.start()
        t0 = time.monotonic()
        cls.lab.add_guest("ovr", workload="idle", memory_mib=1024)
        cls.lab.add_guest("stream", workload="stream", memory_mib=1024)
        cls.lab.add_guest("nob", workload="idle", memory_mib=1024, balloon=False)
        cls.lab.wait_ready("ovr", timeout=90)
        cls.lab.wait_ready("stream", timeout=90)
        wait_for("nob heartbeat", lambda: cls.lab.heartbeats("nob"), timeout=90)
        print("\n  lab: 3 guests ready in %.1fs" % (time.monotonic() - t0))
        cls.daemon = None
        cls.start_daemon()

    @classmethod
    def start_daemon(cls):
        cls.daemon = harness.Daemon(cls.workdir, cls.lab.uri, agent_keys=cls.keys,
                                    guest_memory_budget_bytes=ROOM_MIB * MIB, state_file=cls.state_file, **FLAGS)
        return cls.daemon

    @classmethod
    def tearDownClass(cls):
        if cls.daemon:
            cls.daemon.stop()
        cls.lab.stop()
        print("\n  FaultsE2E: %.0fs in all" % (time.monotonic() - cls.t_class))

    # ---- helpers ---------------------------------------------------------------------------------
    def guests(self):
        return self.daemon.guests()[0]

    def host(self):
        return self.daemon.guests()[1]

    def virsh_actual_mib(self, name):
        """The guest's current size as libvirt reports it (dominfo: also without a balloon)."""
        m = re.search(r"Used memory:\s+(\d+) KiB", self.lab.virsh("dominfo", name))
        return int(m.group(1)) / 1024

    def set_budget(self, budget_mib):
        self.daemon.ctl("host", "set", "--budget=%dM" % int(budget_mib))
        wait_for("budget %d MiB in force" % budget_mib,
                 lambda: int(self.host().get("guest_budget_bytes", 0)) == int(budget_mib) * MIB, timeout=10, interval=0.2)

    def wait_managed(self, names, timeout=30):
        def ok():
            g = self.guests()
            return all(n in g and g[n]["management_state"] == "MANAGEMENT_STATE_MANAGED"
                       and g[n]["stats"].get("stats_fresh") for n in names) and g
        return wait_for("%s managed with fresh stats" % ",".join(names), ok, timeout=timeout, interval=0.3)

    def libvirt_errors(self, exclude_operation=None):
        text = self.daemon.metrics()
        total = 0
        for line in text.splitlines():
            m = re.match(r'^plimsoll_libvirt_errors_total\{operation="(\w+)"\} (\S+)$', line)
            if m and m.group(1) != exclude_operation:
                total += float(m.group(2))
        return total

    # ---- 1 ---------------------------------------------------------------------------------------
    def test_1_libvirtd_killed_and_restarted(self):
        d = self.daemon
        before = self.wait_managed(["ovr", "stream"], timeout=40)
        self.assertIn("nob", before)
        uuids_before = {n: g["uuid"] for n, g in before.items()}
        pid = self.lab.libvirtd_pid()
        self.assertIsNotNone(pid)
        os.kill(pid, signal.SIGKILL)
        t_kill = time.monotonic()
        wait_for("libvirtd %d gone" % pid, lambda: not os.path.exists("/proc/%d" % pid)
                 or open("/proc/%d/stat" % pid).read().split()[2] == "Z", timeout=10, interval=0.05)
        wait_for("plimsolld to see libvirt down", lambda: self.host().get("libvirt_connected") is not True,
                 timeout=15, interval=0.1)
        t_down = time.monotonic() - t_kill
        # The targets to hold are those at the loss: a tick between `before` and the kill may
        # still have moved one (a CI run saw stream go 1024 -> 1013.7 MiB in that gap).
        targets_before = {n: int(g["target_bytes"]) for n, g in self.guests().items()}
        # The policy would shrink now if it could: the guests hold 768 MiB more than this.
        total = sum(int(g["actual_bytes"]) for g in before.values()) / MIB
        budget = int(total - 768)
        self.set_budget(budget)  # the runtime host policy works without libvirt
        log_at_down = d.read_log()
        moves_at_down = len([x for x in decisions(log_at_down) if x["applied"]])
        harness.wait_ticks(d, 4)  # four ticks without libvirt
        # Still serving, everything held.
        guests, host = d.guests()
        self.assertFalse(host.get("libvirt_connected", False))
        self.assertEqual(sorted(guests), sorted(before))
        for n, g in guests.items():
            self.assertEqual(int(g["target_bytes"]), targets_before[n], n)
        m = d.metrics()
        self.assertEqual(metric_values(m, "plimsoll_libvirt_connected"), [0.0])
        log = d.read_log()
        self.assertEqual(len([x for x in decisions(log) if x["applied"]]), moves_at_down,
                         "balloons moved while libvirt was down")
        lost = line_numbers(log, "libvirt connection lost")
        self.assertTrue(lost, "no 'connection lost' line")
        self.assertEqual(decisions(log, lost[-1] + 1), [], "decisions without libvirt")
        # QEMU guests survive a libvirtd restart.
        t_restart = time.monotonic()
        self.lab.start()
        self.assertEqual(sorted(self.lab.domains()), ["nob", "ovr", "stream"])
        wait_for("plimsolld reconnected", lambda: self.host().get("libvirt_connected") is True,
                 timeout=45, interval=0.1)
        t_reconnect = time.monotonic() - t_restart
        self.assertEqual(metric_values(d.metrics(), "plimsoll_libvirt_connected"), [1.0])
        after = self.wait_managed(["ovr", "stream"], timeout=30)
        t_fresh = time.monotonic() - t_restart
        self.assertEqual({n: g["uuid"] for n, g in after.items()}, uuids_before, "guests not kept")
        # The overcommit is real: plimsolld does shrink, once the stats are fresh again.
        wait_for("a shrink after the reconnect",
                 lambda: [x for x in decisions(d.read_log(), lost[-1] + 1)
                          if x["direction"] == "inflate" and x["applied"]], timeout=40, interval=0.5)
        log = d.read_log()
        connected = [no for no in line_numbers(log, "libvirt connected") if "control_loop.cc" in log.splitlines()[no]]
        self.assertTrue(connected and connected[-1] > lost[-1], "no reconnect line after the loss")
        t_connected = log_time(log.splitlines()[connected[-1]].split()[1])
        shrinks = [x for x in decisions(log, connected[-1] + 1) if x["direction"] == "inflate" and x["applied"]]
        for x in shrinks:
            # The stats read in the reconnect's own tick prove nothing (their last_update may be
            # old); only a later read that sees it advance does. Holds are not logged, so the
            # reconnect tick is told by time: its decisions follow the "connected" line within
            # milliseconds, the next tick's a tick (1 s) later.
            gap = (x["time"] - t_connected).total_seconds()
            self.assertGreaterEqual(gap, 0.5, "shrink in the reconnect's own tick: %r" % x)
            self.assertLessEqual(x["age"], STALE_AFTER_S, "shrink on stale stats: %r" % x)
        self.assertNotIn("guest gone", "\n".join(log.splitlines()[lost[-1]:]))
        print("\n  libvirtd killed: plimsolld saw it down in %.1fs; libvirtd restarted, reconnected in %.1fs, "
              "guests managed+fresh in %.1fs; first shrink %.2fs after the reconnect (stats_age=%.1fs, %.0f -> %.0f MiB); "
              "budget %d MiB set during the outage" % (
                  t_down, t_reconnect, t_fresh, (shrinks[0]["time"] - t_connected).total_seconds(), shrinks[0]["age"],
                  shrinks[0]["prev"], shrinks[0]["target"], budget))

    # ---- 2 ---------------------------------------------------------------------------------------
    def test_2_guest_destroyed_during_inflation(self):
        d = self.daemon
        self.set_budget(ROOM_MIB)
        self.lab.add_guest("victim", workload="idle", memory_mib=1024)
        self.lab.wait_ready("victim", timeout=90)
        guests = self.wait_managed(["ovr", "stream", "victim"], timeout=30)
        # enable_stats errors come from nob every tick (see test_3b); the rest must stay flat.
        errors_before = self.libvirt_errors(exclude_operation="enable_stats")
        start_line = len(d.read_log().splitlines())
        total = sum(int(g["actual_bytes"]) for g in guests.values()) / MIB
        budget = int(total - 600)
        self.set_budget(budget)
        t0 = time.monotonic()

        def victim_inflating():
            return [x for x in decisions(d.read_log(), start_line)
                    if x["guest"] == "victim" and x["direction"] == "inflate" and x["applied"]]
        first = wait_for("plimsolld inflating victim", victim_inflating, timeout=30, interval=0.05)[0]
        actual_at_destroy = self.virsh_actual_mib("victim")
        self.lab.destroy("victim")
        t_destroy = time.monotonic() - t0
        print("\n  victim destroyed %.1fs after the budget cut (%d MiB): decision %.1f -> %.1f MiB, "
              "actual %.1f MiB at destroy" % (t_destroy, budget, first["prev"], first["target"], actual_at_destroy))
        wait_for("victim gone from the API", lambda: "victim" not in self.guests(), timeout=15, interval=0.2)
        wait_for("victim gone from /metrics", lambda: 'domain="victim"' not in d.metrics(), timeout=10)
        self.assertIsNone(d.proc.poll(), "plimsolld must keep running")
        self.wait_managed(["ovr", "stream"])
        harness.wait_ticks(d, 4)  # four ticks after the destroy, for the error count below
        guests, host = d.guests()
        self.assertEqual(sorted(guests), ["nob", "ovr", "stream"])
        self.assertTrue(host["libvirt_connected"])
        for n in ("ovr", "stream"):
            self.assertEqual(guests[n]["management_state"], "MANAGEMENT_STATE_MANAGED", n)
        errors = self.libvirt_errors(exclude_operation="enable_stats") - errors_before
        print("  libvirt errors during the destroy: %d" % errors)
        self.assertLessEqual(errors, 3, "libvirt error storm after a destroy")
        log = "\n".join(d.read_log().splitlines()[start_line:])
        self.assertIn("guest gone uuid=", log)
        warnings = [l for l in log.splitlines() if l.startswith("W") and "victim" in l]
        self.assertLessEqual(len(warnings), 3, "\n".join(warnings))
        self.assertEqual(sum(metric_values(d.metrics(), "plimsoll_guests")), 3)

    # ---- 3 ---------------------------------------------------------------------------------------
    def test_3_guest_without_balloon(self):
        d = self.daemon
        g = wait_for("nob reported no-balloon",
                     lambda: (self.guests()["nob"]["management_state"] == "MANAGEMENT_STATE_NO_BALLOON"
                              and self.guests()["nob"]), timeout=40, interval=0.5)
        self.assertEqual(int(g["target_bytes"]), 1024 * MIB)
        self.assertEqual(int(g["max_bytes"]), 1024 * MIB)
        self.assertEqual(int(g["actual_bytes"]), 1024 * MIB)
        self.assertEqual(self.virsh_actual_mib("nob"), 1024)
        self.assertFalse(g["stats"].get("stats_fresh", False))
        # Budgets below the total were in force in tests 1 and 2: it was never pushed.
        moves = [x for x in decisions(d.read_log()) if x["guest"] == "nob" and x["direction"] != "hold"]
        self.assertEqual(moves, [], "nob was pushed")
        self.assertNotIn("guest=nob apply failed", d.read_log())
        m = d.metrics()
        self.assertEqual(metric_values(m, "plimsoll_guests", state="no_balloon"), [1.0])
        self.assertEqual(metric_values(m, "plimsoll_guest_managed", domain="nob"), [0.0])
        errs = {op: metric_values(m, "plimsoll_libvirt_errors_total", operation=op)
                for op in ("enable_stats", "set_target", "balloon_stats")}
        print("\n  nob: state=%s target=actual=max=1024 MiB; libvirt errors by op %s" % (
            g["management_state"], errs))
        # The series exists at 0 from the start (docs/metrics.md): no failed SetMemory at all.
        self.assertEqual(errs["set_target"], [0.0], "a SetMemory on the guest without a balloon")

    def test_3b_guest_without_balloon_no_error_storm(self):
        # libvirt refuses virDomainSetMemoryStatsPeriod on a guest without a balloon device.
        # plimsolld used to retry it every tick, forever (one WARNING and one
        # plimsoll_libvirt_errors_total{operation="enable_stats"} per tick); it now retries with
        # a backoff of 10 s doubling to 10 min (server/loop/control_loop.cc, Collect).
        d = self.daemon
        e0 = self.libvirt_errors() - self.libvirt_errors(exclude_operation="enable_stats")
        w0 = len(line_numbers(d.read_log(), "enabling balloon stats failed guest=nob"))
        time.sleep(5)
        e1 = self.libvirt_errors() - self.libvirt_errors(exclude_operation="enable_stats")
        w1 = len(line_numbers(d.read_log(), "enabling balloon stats failed guest=nob"))
        print("\n  nob, 5 s: +%d enable_stats errors, +%d warning lines (%d lines in all)" % (e1 - e0, w1 - w0, w1))
        self.assertLessEqual(e1 - e0, 1, "enable_stats errors keep growing for a guest without a balloon")
        self.assertLessEqual(w1 - w0, 1, "a warning every tick for a guest without a balloon")

    # ---- 4 ---------------------------------------------------------------------------------------
    def test_4_guest_deflates_itself_on_oom(self):
        d = self.daemon
        self.set_budget(ROOM_MIB)
        # The pin must land before the allocation starts: 45 s from the guest's workload start
        # leave room for a boot slowed by a loaded 2-core machine (ready after 34 s with the
        # suite's other process booting guests beside it; 20 s and 30 s did not suffice).
        anon_after = 45
        self.lab.add_guest("oom", workload="anon", memory_mib=1024, anon_mib=600, anon_after=anon_after,
                           autodeflate=True)
        t0 = time.monotonic()
        self.lab.wait_ready("oom", timeout=90)
        wait_for("oom adopted", lambda: "oom" in self.guests(), timeout=15, interval=0.2)
        # Forced: a pin below the guest's floor (its 600 MiB allocation to come) is what this test
        # needs, and without force a pin stops at the floor.
        d.ctl("set", "oom", "--pin=300M", "--force", "--note=faults-e2e oom")
        self.lab.wait_actual("oom", 300, tolerance=0.05, timeout=anon_after - (time.monotonic() - t0) - 2)
        t_pin = time.monotonic() - t0
        self.assertNotIn("allocating_mib", self.lab.console("oom"), "the allocation began before the pin landed")
        start_line = len(d.read_log().splitlines())
        wait_for("oom workload allocated 600 MiB",
                 lambda: "allocated_mib=600" in self.lab.console("oom"), timeout=120, interval=0.5)
        t_alloc = time.monotonic() - t0
        actual = self.virsh_actual_mib("oom")
        self.assertGreater(actual, 300 * 1.05, "actual did not rise above the 300 MiB target")
        g = wait_for("oom self_deflated", lambda: self.guests()["oom"]["balloon_state"] == "self_deflated"
                     and self.guests()["oom"], timeout=15, interval=0.3)
        self.assertEqual(int(g["target_bytes"]), 300 * MIB)
        self.assertEqual(int(g["override"]["pin_bytes"]), 300 * MIB)
        self.assertEqual(metric_values(d.metrics(), "plimsoll_guest_state", domain="oom", state="self_deflated"), [1.0])
        # The daemon accepted it and did not push the balloon back.
        pushed = [x for x in decisions(d.read_log(), start_line) if x["guest"] == "oom" and x["applied"]]
        self.assertEqual(pushed, [])
        harness.wait_heartbeats(self.lab, ["oom"])  # one more heartbeat
        hb = self.lab.heartbeat("oom")
        self.assertEqual(hb["oom_kill"], 0, hb)
        self.assertGreater(hb["balloon_deflate"], 0, hb)
        warn = [l for l in d.read_log().splitlines() if "balloon state guest=oom" in l]
        print("\n  oom: pin 300 MiB landed %.1fs after create; 600 MiB allocated %.1fs after create; actual now "
              "%.0f MiB (virsh), oom_kill=%d balloon_deflate=%d pages; %s" % (
                  t_pin, t_alloc, actual, hb["oom_kill"], hb["balloon_deflate"], warn[-1] if warn else "no warning"))
        # Give it back to the policy for the next tests.
        d.ctl("clear", "oom")

    # ---- 5 ---------------------------------------------------------------------------------------
    def test_5_daemon_sigkilled_and_restarted(self):
        d = self.daemon
        d.ctl("set", "ovr", "--min=512M", "--shares=300", "--note=faults-e2e")
        override = wait_for("override in GetGuest",
                            lambda: self.guests()["ovr"].get("override", {}).get("min_bytes") and
                            self.guests()["ovr"]["override"], timeout=10, interval=0.2)
        harness.wait_ticks(d, 2)  # the override in force for a couple of ticks
        d.proc.send_signal(signal.SIGKILL)
        d.stop()
        self.assertEqual(d.proc.returncode, -signal.SIGKILL)
        names = ["nob", "oom", "ovr", "stream"]
        # A balloon in flight lands.
        before = harness.wait_still("balloons after the SIGKILL", lambda: {n: self.virsh_actual_mib(n) for n in names})
        os.unlink(d.socket)  # a SIGKILLed daemon leaves its socket behind
        t0 = time.monotonic()
        d = self.start_daemon()
        first = wait_for("first view after restart", lambda: len(self.guests()) == 4 and self.guests(),
                         timeout=15, interval=0.1)
        t_view = time.monotonic() - t0
        o = first["ovr"].get("override", {})
        for k in ("min_bytes", "shares", "note", "guest_uuid"):
            self.assertEqual(o.get(k), override.get(k), k)
        self.assertEqual(int(first["ovr"]["min_bytes"]), 512 * MIB)
        for n in names:
            self.assertAlmostEqual(mib(first[n]["target_bytes"]), before[n], delta=max(16, 0.02 * before[n]), msg=n)
        time.sleep(max(0, 3.5 - (time.monotonic() - t0)))
        log = d.read_log()
        all_lines = decisions(log)
        self.assertTrue(all_lines)
        t_start = log_time(log.splitlines()[0].split()[1])
        early = [x for x in all_lines if x["applied"] and (x["time"] - t_start).total_seconds() <= 3.0]
        print("\n  plimsolld restarted: first view in %.2fs; moves applied in its first 3 s: %d %s" % (
            t_view, len(early), ["%s %.0f->%.0f" % (x["guest"], x["prev"], x["target"]) for x in early]))
        # No burst: nothing in the restarted daemon's first tick (its stats must be seen to
        # advance first), then only the policy's ordinary step, one per guest: a take with its
        # numbers measured on a fresh report, never below the guest's floor (docs/policy.md,
        # "Per guest"). A guest may be given memory back after it (growing is never a burst).
        first_tick = min(x["tick"] for x in all_lines)
        per_guest = {}
        for x in early:
            self.assertGreater(x["tick"], first_tick, "a move in the first tick: %r" % x)
            if x["direction"] != "inflate":
                continue
            per_guest[x["guest"]] = per_guest.get(x["guest"], 0) + 1
            self.assertRegex(x["reason"], r"^pagecache: (take|probe) .* measured=1", x)
            self.assertLessEqual(x["age"], STALE_AFTER_S, x)
            floor = re.search(r" floor=([\d.]+)MiB", x["reason"])
            ws = re.search(r" ws=([\d.]+)MiB", x["reason"])
            self.assertTrue(floor and ws, x)
            self.assertGreaterEqual(x["target"] + ROUNDING_MIB, float(floor.group(1)), x)
            # The law's step: half of what lies above the working set, or a 2% probe below it.
            step = max(0.5 * (x["prev"] - float(ws.group(1))), 0.02 * x["max"])
            self.assertLessEqual(x["prev"] - x["target"], step + 2 * ROUNDING_MIB, "more than one step: %r" % x)
        self.assertTrue(all(v == 1 for v in per_guest.values()), per_guest)
        # Every balloon rests where it was or where one of the restarted daemon's moves sent it:
        # nothing else moved it.
        now = harness.wait_still("balloons after the first moves", lambda: {n: self.virsh_actual_mib(n) for n in names})
        applied = decisions(d.read_log())
        for n in names:
            sizes = [before[n]] + [x["target"] for x in applied if x["guest"] == n and x["applied"]]
            self.assertTrue(any(abs(now[n] - s) <= max(16, 0.02 * s) for s in sizes), (n, now[n], sizes))

    # ---- 6 ---------------------------------------------------------------------------------------
    def test_6_sudden_host_pressure(self):
        d = self.daemon

        def settled():
            g = self.guests()
            for n in managed:
                if not g[n]["stats"].get("stats_fresh"):
                    return False
                if abs(int(g[n]["actual_bytes"]) - int(g[n]["target_bytes"])) > max(16 * MIB, 0.08 * int(g[n]["target_bytes"])):
                    return False
                # A decision of the policy's, not the pin's from before `clear` reached the loop
                # (the tick after the clear can still carry "pinned at 1024MiB by override";
                # seen once in a fresh-clone run).
                if " floor=" not in g[n].get("last_decision", {}).get("reason", ""):
                    return False
            return g
        # Start from full guests, so the cut below does not depend on how far the policy has
        # probed them down during the earlier tests (a slow run had probed them to 420 MiB above
        # their floors, too little for a cut that takes several bounded steps).
        managed = ("ovr", "stream", "oom")
        for n in managed:
            d.ctl("set", n, "--pin=1024M", "--note=faults-e2e refill")
        for n in managed:
            self.lab.wait_actual(n, 1024, tolerance=0.04, timeout=30)
        for n in managed:
            d.ctl("clear", n)  # back to the policy and the default floor (drops test 5's min too)
        guests = wait_for("guests settled", settled, timeout=30, interval=0.5)
        oom_before = {n: self.lab.heartbeat(n)["oom_kill"] for n in guests}
        self.assertEqual(set(oom_before.values()), {0}, oom_before)
        total = sum(int(g["actual_bytes"]) for g in guests.values()) / MIB
        # What the policy may take without hurting anyone: down to its own floor per guest (hard
        # demand plus headroom, in the decision's reason), which is above Guest.min_bytes.
        spare = 0
        for n in managed:
            m = re.search(r" floor=([\d.]+)MiB", guests[n]["last_decision"]["reason"])
            self.assertTrue(m, guests[n]["last_decision"])
            spare += max(0, int(guests[n]["actual_bytes"]) / MIB - float(m.group(1)))
        cut = min(768, 0.8 * spare)
        self.assertGreaterEqual(cut, 384, "not enough to reclaim for a meaningful test (spare %.0f MiB)" % spare)
        budget = int(total - cut)
        start_line = len(d.read_log().splitlines())
        t0 = time.monotonic()
        self.set_budget(budget)

        def within():
            g = self.guests()
            return sum(int(x["actual_bytes"]) for x in g.values()) <= (budget + 16) * MIB and g
        guests = wait_for("guests within %d MiB" % budget, within, timeout=90, interval=0.5)
        t_conv = time.monotonic() - t0
        harness.wait_heartbeats(self.lab, list(guests))  # a heartbeat after the last move
        shrinks = [x for x in decisions(d.read_log(), start_line) if x["direction"] == "inflate" and x["applied"]]
        self.assertTrue(shrinks)
        biggest = 0
        for x in shrinks:
            # A step is the guest's own take (down to what the law allows it, `allow=`) plus what
            # the budget takes (`taken=`), which is at most step_fraction of the ceiling per
            # decision and never goes below the guest's floor (docs/policy.md, "Host").
            step = x["prev"] - x["target"]
            biggest = max(biggest, step)
            allow = re.search(r" allow=([\d.]+)MiB", x["reason"])
            allow = float(allow.group(1)) if allow else x["prev"]
            taken = re.search(r" taken=([\d.]+)MiB", x["reason"])
            taken = float(taken.group(1)) if taken else 0.0
            floor = re.search(r" floor=([\d.]+)MiB", x["reason"])
            floor = float(floor.group(1)) if floor else x["min"]
            self.assertLessEqual(taken, STEP_FRACTION * x["max"] + ROUNDING_MIB, "a budget step over the limit: %r" % x)
            self.assertLessEqual(step, max(0.0, x["prev"] - allow) + taken + 2 * ROUNDING_MIB,
                                 "a step beyond the guest's take and the budget's: %r" % x)
            self.assertGreaterEqual(x["target"] + ROUNDING_MIB, floor, "below the policy's floor: %r" % x)
            self.assertGreaterEqual(x["target"] + ROUNDING_MIB, x["min"], "below the floor: %r" % x)
        guests = self.guests()
        for n, g in guests.items():
            self.assertGreaterEqual(int(g["target_bytes"]), int(g["min_bytes"]), n)
            self.assertGreaterEqual(int(g["actual_bytes"]), int(g["min_bytes"]) - 16 * MIB, n)
        self.assertEqual(int(guests["nob"]["target_bytes"]), 1024 * MIB)
        ooms = {n: self.lab.heartbeat(n)["oom_kill"] for n in guests}
        print("\n  guests held %d MiB (%.0f MiB above the policy's floors); budget -> %d MiB: within it in %.1fs, %d shrink decisions, biggest step %.1f MiB; "
              "final %s; oom_kill %s" % (int(total), spare, budget, t_conv, len(shrinks), biggest,
                                         {n: round(mib(g["actual_bytes"])) for n, g in guests.items()}, ooms))
        self.assertEqual(set(ooms.values()), {0}, ooms)

    # ---- 7 ---------------------------------------------------------------------------------------
    def test_7_hold_released_when_hard_demand_outgrows_it(self):
        """A guest without an agent and without autodeflate, held by a Reclaim, then allocating
        100 MiB every 10 s: libvirt shows its hard demand (actual - MemAvailable) rising, and the
        hold ends before the OOM killer does anything."""
        d = self.daemon
        self.set_budget(ROOM_MIB)
        # Until the hold is in place the host runs `static`, so the law has not already taken
        # held towards its working set (where it was when the plan came varied from run to run,
        # and near its floor a hold above it left nothing to plan). The law decides again from
        # the hold on.
        d.ctl("host", "set", "--policy=static")
        wait_for("static in force", lambda: self.host().get("policy") == "static", timeout=10, interval=0.2)
        go = os.path.join(self.workdir, "held-go")
        self.lab.add_guest("held", workload="idle", memory_mib=1024, autodeflate=False, run=ALLOC_STEPS,
                           cmdline_extra="plimsoll.go_file=%s plimsoll.steps=5 plimsoll.step_mib=100 "
                                         "plimsoll.every=10" % go)
        self.lab.wait_ready("held", timeout=90)
        wait_for("held adopted", lambda: "held" in self.guests(), timeout=15, interval=0.2)
        self.wait_managed(["held"])
        # Only held can give: the plan is the issue's, a 1 GiB guest taken to a few hundred MiB.
        others = [n for n, g in self.guests().items()
                  if n != "held" and g["management_state"] != "MANAGEMENT_STATE_NO_BALLOON"]
        for n in others:
            d.ctl("set", n, "--exclude", "--note=faults-e2e held")
        try:
            # 400 of its 1024 MiB: the hold (624 MiB) sits well above an idle guest's hard demand
            # plus headroom (about 350 MiB), so only the allocations can end it.
            ask_mib = 400
            plan = json.loads(d.ctl("reclaim", "%dM" % ask_mib, "--hold=10m", "--json"))
            items = plan.get("plan", plan).get("items", [])
            self.assertEqual([i["guest_name"] for i in items], ["held"], plan)
            held_mib = int(items[0]["new_target_bytes"]) / MIB
            self.assertAlmostEqual(int(items[0]["reclaim_bytes"]) / MIB, ask_mib, delta=2,
                                   msg="the plan takes what was asked: %r" % plan)
            self.assertLessEqual(held_mib, 700, "a 1 GiB guest held at a few hundred MiB: %r" % plan)
            hold_line = len(d.read_log().splitlines())
            self.lab.wait_actual("held", held_mib, tolerance=0.05, timeout=60)
            # The law without burst room: held booted seconds ago, and its boot reads as a burst
            # of hard demand that burst room would keep in its floor (above the hold) for
            # burst_window_s (600 s), releasing the hold before any allocation. Its allocations
            # raise the hard demand itself.
            d.ctl("host", "set", "--policy=pagecache:burst_window_s=0")
            wait_for("pagecache in force again", lambda: str(self.host().get("policy", "")).startswith("pagecache"),
                     timeout=10, interval=0.2)
            time.sleep(3)  # three ticks at the hold, under the law
            start_line = len(d.read_log().splitlines())
            early = [l for l in d.read_log().splitlines()[hold_line:start_line] if "reclaim hold released" in l]
            self.assertEqual(early, [], "a hold above the guest's floor is kept while the guest idles")
            released_before = sum(metric_values(d.metrics(), "plimsoll_reclaim_holds_released_total"))
            line_before = json.loads(d.ctl("line", "--json"))
            t0 = time.monotonic()
            with open(go, "w") as f:
                f.write("go\n")
            wait_for("held's hold released", lambda: [
                l for l in d.read_log().splitlines()[start_line:]
                if "reclaim hold released" in l and "guest=held " in l], timeout=60, interval=0.5)
            t_release = time.monotonic() - t0
            wait_for("held allocated 5 x 100 MiB",
                     lambda: self.lab.console("held").count("allocated_mib=100") >= 5, timeout=150, interval=1)
            harness.wait_heartbeats(self.lab, ["held"])
            hb = self.lab.heartbeat("held")
            # The Plimsoll line saw the growth: held's 500 MiB are committed now, and the host
            # offers less (within a few ticks of the last allocation's stats).
            def line_grew():
                line = json.loads(d.ctl("line", "--json"))
                grew = (int(line.get("committed_bytes", 0)) - int(line_before.get("committed_bytes", 0))) / MIB
                return grew >= 300 and line
            # 300 of the 500 MiB: the guest's kernel gives back some of its own as it fills up
            # (+416 and +523 MiB seen).
            line_after = wait_for("the line's committed memory up by 300 MiB", line_grew, timeout=20, interval=0.5)
            self.assertFalse(line_after.get("stale", False), line_after)
            # Less than the growth: the other guests' floors move meanwhile too. Against the
            # headroom before: the offer before may still lag a headroom that rose within
            # offer_hold (the hold's landing lowers held's commitment).
            self.assertLessEqual(int(line_after.get("offered_bytes", 0)),
                                 max(0, int(line_before.get("headroom_bytes", 0)) - 200 * MIB), (line_before, line_after))
            released = [l for l in d.read_log().splitlines()[start_line:] if "reclaim hold released" in l]
            self.assertIn("floor_above_hold", released[0])
            self.assertEqual(sum(metric_values(d.metrics(), "plimsoll_reclaim_holds_released_total")),
                             released_before + 1)
            g = self.guests()["held"]
            self.assertNotIn("reclaim_hold", g)
            print("\n  held: hold at %.0f MiB; released %.1fs after the first allocation began (%s); "
                  "5 x 100 MiB allocated, actual now %.0f MiB, oom_kill=%d; the line: committed %.0f -> %.0f MiB, "
                  "offered %.0f -> %.0f MiB" % (
                      held_mib, t_release, released[0].split(": ", 1)[-1], mib(g["actual_bytes"]), hb["oom_kill"],
                      mib(line_before.get("committed_bytes", 0)), mib(line_after.get("committed_bytes", 0)),
                      mib(line_before.get("offered_bytes", 0)), mib(line_after.get("offered_bytes", 0))))
            self.assertEqual(hb["oom_kill"], 0, hb)
        finally:
            d.ctl("host", "set", "--clear=policy")
            for n in others:
                d.ctl("clear", n, "--fields=exclude")


if __name__ == "__main__":
    unittest.main(verbosity=2)
