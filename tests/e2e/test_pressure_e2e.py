#!/usr/bin/python3
"""plimsolld without the agent, on both of the lab's kernels: the balloon's pressure counters.

One lab holds a guest of each flavour (tests/lab/lab.py FLAVOURS), neither with an agent:
  "modern": bookworm-backports' 6.12 kernel on its QEMU 10.0, whose balloon driver sends the
            guest's OOM kills, allocation stalls and scan/reclaim counts; held at its floor of
            330 MiB with balloon auto-deflate off (only plimsolld can give it memory), it
            allocates 256 MiB when test 2 says so;
  "stable": Debian 12's 6.1 kernel on QEMU 7.2, which has none of them.
The tests run in order:
  1. the counters reach the API and /metrics for the modern guest and are absent (not zero) for
     the stable one, whose lack is counted (once here: it is asked again only every 5 min);
  2. when the modern guest stalls in allocation (or loses a task to the OOM killer), plimsolld
     gives it memory within a tick of the guest's report reaching QEMU (the guest reports every
     stats period), and says the pressure was why.
"""

import datetime
import json
import os
import tempfile
import time
import unittest

import harness
from harness import MIB, wait_for
from test_faults_e2e import ALLOC_STEPS, decisions

# The guest reports every 20 s: its 256 MiB allocation and the kill it ends in take under 2 s,
# so the report that shows the allocation almost always shows what it cost too (stalls, a kill).
# A report in the middle of it would let the law grow the guest on its falling MemAvailable
# alone, before any stall: the longer the period, the rarer that is.
STATS_PERIOD_S = 20
TICK_S = 1
HELD_MIB = 330
# Less than the held guest's MemTotal (273 MiB: without auto-deflate the balloon lowers it, and
# Linux refuses one allocation larger than all its memory), more than its free memory (235 MiB):
# the allocation stalls and, without the agent, ends in an OOM kill within a report interval.
ALLOC_MIB = 256
QEMU_GUEST_STATS = ('{"execute":"qom-get","arguments":{"path":"/machine/peripheral/balloon0",'
                    '"property":"guest-stats"}}')
# The floor is the held size, so the law cannot take from the held guest: only its demand moves
# it, and the test knows where the guest stands when the allocation starts.
DAEMON_FLAGS = dict(tick="%ds" % TICK_S, stats_period_seconds=STATS_PERIOD_S, stale_after="60s", host_reserve_bytes=0,
                    policy="pagecache", **{"guest_defaults.min_bytes": HELD_MIB * MIB})


@unittest.skipIf(harness.skip_reason(), harness.skip_reason())
class BalloonPressureE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-e2e-")
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"),
                                     workload_bin=harness.WORKLOAD)
        cls.lab.start()
        t0 = time.monotonic()
        # The allocation starts when the test writes the go file (alloc_steps.sh, in the guest).
        cls.go_file = os.path.join(cls.workdir, "go")
        cls.lab.add_guest("modern", workload="idle", memory_mib=1024, autodeflate=False, agent_channel=False,
                          run=ALLOC_STEPS, flavour="backports",
                          cmdline_extra="plimsoll.go_file=%s plimsoll.steps=1 plimsoll.step_mib=%d"
                                        % (cls.go_file, ALLOC_MIB))
        cls.lab.add_guest("stable", workload="idle", memory_mib=512, agent_channel=False,
                          flavour="stable")
        for name in ("modern", "stable"):
            cls.lab.wait_ready(name, timeout=120)
        cls.lab.setmem("modern", HELD_MIB)
        cls.lab.wait_actual("modern", HELD_MIB, timeout=60)
        print("\n  lab: both flavours ready, modern held at %d MiB in %.1fs" % (HELD_MIB, time.monotonic() - t0))
        # A budget with room for both at their ceilings: nothing needs taking, so any growth of
        # the held guest is the law answering its pressure.
        cls.daemon = harness.Daemon(cls.workdir, cls.lab.uri, guest_memory_budget_bytes=4096 * MIB,
                                    **DAEMON_FLAGS)

    @classmethod
    def tearDownClass(cls):
        if cls.daemon:
            cls.daemon.stop()
        cls.lab.stop()

    def pressure(self, name):
        guests, _ = self.daemon.guests()
        return guests.get(name, {}).get("stats", {}).get("balloon_pressure")

    def test_1_counters_where_the_kernel_sends_them_absent_elsewhere(self):
        wait_for("the modern guest's pressure counters in the API", lambda: self.pressure("modern"),
                 STATS_PERIOD_S + 15)
        p = self.pressure("modern")
        for key in ("oom_kills", "alloc_stalls", "direct_scan_bytes", "direct_reclaim_bytes",
                    "async_scan_bytes", "async_reclaim_bytes"):
            self.assertIn(key, p)
        self.assertEqual(int(p["oom_kills"]), 0)
        self.assertIsNone(self.pressure("stable"))
        text = self.daemon.metrics()
        guests, _ = self.daemon.guests()
        series = lambda name, g: harness.metric(text, name, domain=g, uuid=guests[g]["uuid"])
        self.assertIsNotNone(series("plimsoll_guest_balloon_oom_kills", "modern"))
        self.assertIsNotNone(series("plimsoll_guest_balloon_alloc_stalls", "modern"))
        self.assertIsNone(series("plimsoll_guest_balloon_oom_kills", "stable"))
        self.assertIsNotNone(series("plimsoll_guest_usable_bytes", "stable"))
        # What each guest costs the host: the lab defines every balloon with free page reporting
        # on, and libvirt's bulk stats carry QEMU's RSS (docs/operations.md).
        for g in ("modern", "stable"):
            self.assertEqual(series("plimsoll_guest_free_page_reporting", g), 1, g)
            self.assertGreater(series("plimsoll_guest_host_rss_bytes", g) or 0, 64 * MIB, g)
            self.assertTrue(guests[g].get("free_page_reporting"), g)
        self.assertGreater(harness.metric(text, "plimsoll_host_guests_rss_bytes") or 0, 128 * MIB)
        lacking = harness.metric(text, "plimsoll_balloon_pressure_reads_total", result="lacking")
        read = harness.metric(text, "plimsoll_balloon_pressure_reads_total", result="read")
        self.assertEqual(lacking, 1, "the stable guest's lack is counted once, then asked every 5 min")
        self.assertGreaterEqual(read, 1)
        # libvirt counts the monitor commands: one per new report of the modern guest, none for
        # the stable one after its first.
        calls = harness.metric(text, "plimsoll_libvirt_calls_total", call="virDomainQemuMonitorCommand")
        self.assertAlmostEqual(calls, read + lacking, delta=2)

    def qemu_counters(self, name):
        """The guest's stall and kill counts as QEMU holds them, read directly (not through
        plimsolld): when the guest's report carrying them reached the host."""
        reply = json.loads(self.lab.virsh("qemu-monitor-command", name, QEMU_GUEST_STATS))
        stats = reply["return"].get("stats", {})
        return stats.get("stat-alloc-stalls"), stats.get("stat-oom-kills")

    def test_2_allocation_stalls_move_the_balloon_within_a_tick_of_the_report(self):
        start_line = len(self.daemon.read_log().splitlines())
        base = self.qemu_counters("modern")
        seen = {}
        with open(self.go_file, "w"):
            pass

        def stalled():
            if self.qemu_counters("modern") != base:
                seen["at"] = datetime.datetime.utcnow()
                return True
            return False

        wait_for("the modern guest stalling in allocation", stalled, STATS_PERIOD_S + 60, 0.1)

        def grown():
            # The report that carries the counters also shows the allocation in MemAvailable, so
            # a growth of the floor (a hold) may come a tick before the counters' read: the
            # growth looked for is the law's backoff.
            for d in decisions(self.daemon.read_log(), start_line):
                if (d["guest"] == "modern" and d["target"] > d["prev"] + 1 and d["applied"] and
                        "backoff" in d["reason"] and d["time"] >= seen["at"] - datetime.timedelta(seconds=0.5)):
                    return d
            return None

        wait_for("plimsolld growing the modern guest", grown, 30, 0.2)
        d = grown()
        lag = (d["time"] - seen["at"]).total_seconds()
        stalls, kills = self.qemu_counters("modern")
        print("\n  modern: QEMU had the guest's first stall (now %s stalls, %s OOM kills); %.2fs later "
              "plimsolld moved %.0f -> %.0f MiB: %s" % (stalls, kills, lag, d["prev"], d["target"], d["reason"]))
        # The guest sends its counters with its stats (every stats period). plimsolld sees the
        # stats advance on a tick, reads the counters from QEMU on the reader's thread, and the
        # answer wakes the loop for a tick at least min_wake_interval (1 s) after that one: two
        # ticks' worth, far within the guest's 20 s stats period.
        self.assertLessEqual(lag, 2 * TICK_S + 1.0)
        # The law backs off on an OOM kill (x=oom) or on pressure over its target, which without
        # the agent and the counters could only come from major faults, swap-ins or disk reads:
        # the decision's numbers say which.
        self.assertRegex(d["reason"], r"backoff x=(oom|[0-9])", "the pressure counters were not why")
