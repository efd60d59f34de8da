#!/usr/bin/python3
"""In-guest reclaim of cold page cache, bounded by the host, on a real guest (docs/agent.md
"Reclaim").

One 1 GiB guest (Debian 12's 6.1 kernel, free page reporting on, no swap) reads the lab's stream
file once, then runs plimsoll-agent over TCP to plimsoll-agent-sink, which stands in for the host
and sends the reclaim bounds the test writes to a file. The tests run in order:
  1. without bounds the agent finds memory.reclaim and reclaims nothing;
  2. with bounds (keep 400 MiB) it reclaims the cold cache down to the keep, and the host gets
     the memory back through free page reporting: QEMU's RSS falls, the balloon never moves;
  3. bounds switched off stop it within a few seconds.
Then DaemonReclaimBoundsE2E does it with plimsolld itself as the host (agent.reclaim_bounds): the
keep is the pagecache policy's working set for the guest, and the host gets the rest back while
the guest is in the policy's reclaim pool (docs/policy.md, "In-guest reclaim"): the balloon does
not probe it. Then the guest suddenly allocates 500 MiB: it has them at once, by faulting pages
in, with no deflate and no OOM kill.
LyingReclaimE2E: an agent that claims a reclaim it never did gains nothing (its balloon target and
bounds stay as they were while it reported honestly), the claim shows as unconfirmed, and its
bounds are paused.
"""

import os
import re
import subprocess
import tempfile
import time
import unittest
import uuid

import harness
from harness import MIB, wait_for
from test_hostile_agent_e2e import CLIENT, SYSTEM_PYTHON, client_problem, stop_client

READ_THEN_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "read_then_agent.sh")
SINK = os.path.join(harness.BIN, "server", "agent", "plimsoll-agent-sink")
KEEP_MIB = 400
ALLOC_MIB = 500
LINE_RE = re.compile(r"^uuid=(?P<uuid>\S+) .*active_file_mib=(?P<active>\S+) inactive_file_mib=(?P<inactive>\S+) "
                     r"avail_mib=\S+ reclaim_state=(?P<state>\S+) reclaim_reason=(?P<reason>\S+) "
                     r"reclaim_requested_mib=(?P<requested>\d+) reclaim_achieved_mib=(?P<achieved>\d+)")


def skip_reason():
    if harness.skip_reason():
        return harness.skip_reason()
    if not os.path.exists(SINK):
        return "no %s: bazel build //server/agent:plimsoll-agent-sink" % SINK
    return None


@unittest.skipIf(skip_reason(), skip_reason())
class GuestReclaimE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-e2e-")
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"), workload_bin=harness.WORKLOAD)
        cls.lab.start()
        keys = harness.AgentKeys(cls.workdir)
        cls.uuid = str(uuid.uuid4())
        cls.bounds = os.path.join(cls.workdir, "bounds")
        cls.sink_out = open(os.path.join(cls.workdir, "sink.txt"), "w")
        cls.sink = subprocess.Popen(
            [SINK, "--listen=127.0.0.1:%d" % keys.port, "--key_file=" + keys.host_key,
             "--guest=%s:1024" % cls.uuid, "--reclaim_bounds_file=" + cls.bounds, "--print_every=1s"],
            stdout=cls.sink_out, stderr=subprocess.STDOUT)
        kw = keys.guest_kwargs(guest_uuid=cls.uuid)
        kw["run"] = READ_THEN_AGENT
        cls.lab.add_guest("cold", workload="idle", memory_mib=1024, flavour="stable", **kw)
        cls.lab.wait_ready("cold", timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.sink.terminate()
        cls.sink.wait(timeout=10)
        cls.sink_out.close()
        cls.lab.stop()

    def last(self):
        with open(os.path.join(self.workdir, "sink.txt")) as f:
            rows = [m.groupdict() for m in map(LINE_RE.match, f) if m and m.group("uuid") == self.uuid]
        return rows[-1] if rows else None

    def rss_mib(self):
        return self.lab.dommemstat("cold")["rss"] / 1024.0

    def actual_mib(self):
        return self.lab.dommemstat("cold")["actual"] / 1024.0

    def decisions(self, last=12):
        """The daemon's last decisions for the guest (logged when they change), shortened."""
        lines = [l for l in self.daemon.read_log().splitlines() if " decision " in l and "guest=cold" in l]
        return "\n".join(re.sub(r" uuid=\S+| policy=\S+", "", l)[:400] for l in lines[-last:])

    def test_1_without_bounds_nothing_is_reclaimed(self):
        def cached():
            r = self.last()
            return r if r and r["active"] != "-" and float(r["active"]) + float(r["inactive"]) >= 500 else None

        wait_for("the guest's cold cache in its agent's reports", cached, 180, 0.5)
        r = self.last()
        self.assertEqual(r["reason"], "no_bounds", r)
        self.assertEqual(int(r["requested"]), 0)

    def test_2_bounds_reclaim_cold_cache_and_the_host_gets_it_back(self):
        rss0, actual0 = self.rss_mib(), self.actual_mib()
        cache0 = float(self.last()["active"]) + float(self.last()["inactive"])
        with open(self.bounds, "w") as f:
            f.write("keep_mib=%d,step_mib=64,rate_mib=32" % KEEP_MIB)
        wait_for("the agent reclaiming 200 MiB", lambda: int((self.last() or {}).get("achieved", 0)) >= 200, 90, 0.5)
        wait_for("the agent stopping at its keep",
                 lambda: self.last()["reason"] in ("below_keep", "after_partial"), 90, 0.5)
        achieved = int(self.last()["achieved"])
        # Free page reporting hands the freed pages back within seconds (2 MiB blocks).
        wait_for("QEMU's RSS falling", lambda: rss0 - self.rss_mib() >= 0.5 * achieved, 60, 1)
        r = self.last()
        cache1 = float(r["active"]) + float(r["inactive"])
        print("\n  cold: cache %.0f -> %.0f MiB, agent reclaimed %d MiB (%s); QEMU RSS %.0f -> %.0f MiB; "
              "balloon %.0f -> %.0f MiB" % (cache0, cache1, achieved, r["reason"], rss0, self.rss_mib(),
                                             actual0, self.actual_mib()))
        self.assertEqual(self.actual_mib(), actual0, "the balloon moved")
        self.assertLess(cache1, cache0 - 200)
        # The round over (5 s without a step), the agent compacts once, so what reclaim freed in
        # pieces merges into the 2 MiB blocks free page reporting returns (agent/compaction.h).
        rss_before = self.rss_mib()
        wait_for("the agent compacting after its round",
                 lambda: COMPACTED_RE.search(self.lab.console("cold")), 30, 0.5)
        time.sleep(3)  # reporting's delay (2 s) and a stats period
        print("  cold: compacted (%s); QEMU RSS %.0f -> %.0f MiB"
              % (COMPACTED_RE.search(self.lab.console("cold")).group(0), rss_before, self.rss_mib()))

    def test_3_bounds_off_stop_it(self):
        with open(self.bounds, "w") as f:
            f.write("off")
        wait_for("the agent seeing the host switch it off", lambda: self.last()["reason"] == "host_disabled", 15, 0.5)
        requested = int(self.last()["requested"])
        time.sleep(5)
        self.assertEqual(int(self.last()["requested"]), requested)


COMPACTED_RE = re.compile(r"reclaim compacted: freed_since_last=\d+MiB took=\S+")
PAUSED_RE = re.compile(r"reclaim paused: reason=(?P<reason>below_keep|after_partial) used=(?P<used>[0-9.]+)MiB "
                       r"keep=(?P<keep>[0-9.]+)MiB.* phase_achieved=(?P<achieved>\d+).* "
                       r"last_step_keep=(?P<step_keep>[0-9.]+)MiB")


@unittest.skipIf(harness.skip_reason(), harness.skip_reason())
class DaemonReclaimBoundsE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-e2e-")
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"), workload_bin=harness.WORKLOAD)
        cls.lab.start()
        keys = harness.AgentKeys(cls.workdir)
        kw = keys.guest_kwargs()
        kw["run"] = READ_THEN_AGENT
        # The allocation starts when the test writes the go file (read_then_agent.sh).
        cls.go_file = os.path.join(cls.workdir, "go")
        kw["cmdline_extra"] = ("%s plimsoll.go_file=%s plimsoll.step_mib=%d"
                               % (kw.get("cmdline_extra", ""), cls.go_file, ALLOC_MIB)).strip()
        cls.lab.add_guest("cold", workload="idle", memory_mib=1024, flavour="stable", **kw)
        cls.lab.wait_ready("cold", timeout=120)
        # Not pinned: a pin is the policy's floor too, so the keep would be the whole guest. The
        # balloon takes as well, one step every few seconds; the agent is faster. Without the
        # burst room: the guest's boot reads as a burst of demand, held in its floor (so in the
        # keep) for 10 min. Without the pressure profile: the guest reads its file before its
        # agent starts, and a guest without the agent that streams from disk is taken at the
        # pace of its reads (docs/policy.md "Streaming takes"), so the balloon would take the
        # cold cache this test wants the agent to give back.
        cls.daemon = harness.Daemon(cls.workdir, cls.lab.uri, agent_keys=keys, guest_memory_budget_bytes=8192 * MIB,
                                    tick="1s", policy="pagecache:burst_window_s=0:profile_ratio=0",
                                    **{"agent.reclaim_bounds": "true"})

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        cls.lab.stop()

    def actual_mib(self):
        return self.lab.dommemstat("cold")["actual"] / 1024.0

    def decisions(self, last=12):
        """The daemon's last decisions for the guest (logged when they change), shortened."""
        lines = [l for l in self.daemon.read_log().splitlines() if " decision " in l and "guest=cold" in l]
        return "\n".join(re.sub(r" uuid=\S+| policy=\S+", "", l)[:400] for l in lines[-last:])

    def test_1_the_policys_working_set_is_the_keep_and_the_rest_goes_back_to_the_host(self):
        rss0 = 0.0

        def paused():
            # The peak of QEMU's RSS: the guest's read fills it, the agent's reclaim (through
            # free page reporting) is what brings it down. Sampled at the read's end, a busy
            # machine's late sample would miss the first of the fall.
            nonlocal rss0
            rss0 = max(rss0, self.lab.dommemstat("cold")["rss"] / 1024.0)
            found = [m.groupdict() for m in map(PAUSED_RE.search, self.lab.console("cold").splitlines()) if m]
            return found[-1] if found and int(found[-1]["achieved"]) >= 150 * MIB else None

        try:
            wait_for("the agent reclaiming down to the keep plimsolld named", paused, 240, 1)
        except AssertionError as e:
            lines = [l for l in self.lab.console("cold").splitlines() if "reclaim" in l]
            raise AssertionError("%s; agent: %s; decision: %s" % (e, lines[-5:], self.daemon.guests()[0]["cold"].get(
                "last_decision")))
        p = paused()
        guests, _ = self.daemon.guests()
        d = guests["cold"]["last_decision"]
        named = max(int(d.get("working_set_bytes", 0)), int(d.get("policy_floor_bytes", 0))) / MIB
        achieved = int(p["achieved"]) / MIB
        try:
            wait_for("QEMU's RSS falling", lambda: rss0 - self.lab.dommemstat("cold")["rss"] / 1024.0 >= 0.5 * achieved,
                     60, 1)
        except AssertionError as e:
            raise AssertionError("%s; peak RSS %.0f MiB, now %s; the agent reclaimed %.0f MiB; decisions:\n%s"
                                 % (e, rss0, self.lab.dommemstat("cold"), achieved, self.decisions()))
        rss1 = self.lab.dommemstat("cold")["rss"] / 1024.0
        actual = self.lab.dommemstat("cold")["actual"] / 1024.0
        print("\n  cold: plimsolld named keep=%.0f MiB (policy now: %.0f); the agent reclaimed %.0f MiB and stopped at "
              "used=%s MiB (last step's keep %s MiB); QEMU RSS %.0f -> %.0f MiB with the balloon at %.0f MiB"
              % (float(p["keep"]), named, achieved, p["used"], p["step_keep"], rss0, rss1, actual))
        # The keep is the policy's as the daemon publishes it; the agent holds the highest keep
        # named in the last minutes, so it is at least today's, and never the whole guest.
        self.assertGreaterEqual(float(p["keep"]), 0.9 * named)
        self.assertLess(float(p["keep"]), 1024 - 200)
        # The agent stopped at the keep its last step was bounded by (within a step: the kernel
        # frees in batches, docs/agent.md); the keep may have risen since, the guest below it.
        # The host holds less than the guest owns.
        self.assertGreaterEqual(float(p["used"]), min(float(p["keep"]), float(p["step_keep"])) - 64, p)
        self.assertLess(rss1, actual - 100)
        # In the pool (lending, not on a grace): the agent takes the cold cache, the balloon does
        # not probe the guest.
        self.assertIn("pooled rss=", d.get("reason", ""), d)
        self.assertNotIn("grace_left=", d.get("reason", ""), d)

    def test_2_a_pooled_guest_allocates_without_a_deflate(self):
        # The allocation starts once the law holds the guest for its pool, not while a backoff's
        # cooldown holds it anyway: the pool's hold must outlast the allocation, which spends
        # what the guest lent (its RSS rises to its balloon size and it lends nothing for a while).
        def held_by_pool():
            reason = self.daemon.guests()[0]["cold"]["last_decision"].get("reason", "")
            return " agent_reclaims" in reason and "pooled rss=" in reason and "grace_left=" not in reason
        wait_for("the law holding the guest for its pool (its cooldown over)", held_by_pool, 90, 1)
        actual0 = self.actual_mib()
        rss0 = self.lab.dommemstat("cold")["rss"] / 1024.0
        # What the guest holds free under its balloon: the balloon may have taken some before the
        # agent's reclaim made the guest pooled. The allocation fits in it, short of the kernel's
        # reserve, so any deflate would be the policy's doing.
        free = self.lab.dommemstat("cold")["unused"] / 1024.0
        alloc = int(min(ALLOC_MIB, free - 96))
        self.assertGreaterEqual(alloc, 256, "the pooled guest has %.0f MiB free under its %.0f MiB balloon"
                                % (free, actual0))
        lowest = [actual0]
        t0 = time.monotonic()
        with open(self.go_file + ".tmp", "w") as f:
            f.write("%d\n" % alloc)
        os.rename(self.go_file + ".tmp", self.go_file)  # the guest sees the file with its number

        def allocated():
            lowest[0] = min(lowest[0], self.actual_mib())
            return "mode=anon allocated_mib=%d" % alloc in self.lab.console("cold")

        wait_for("the guest's %d MiB allocation" % alloc, allocated, 120, 0.5)
        took = time.monotonic() - t0
        actual1, rss1 = self.actual_mib(), self.lab.dommemstat("cold")["rss"] / 1024.0
        guests, _ = self.daemon.guests()
        d = guests["cold"]["last_decision"]
        print("\n  cold: allocated %d MiB in %.1fs; balloon %.0f -> %.0f MiB (lowest %.0f); QEMU RSS %.0f -> %.0f MiB;"
              " decision: %s" % (alloc, took, actual0, actual1, lowest[0], rss0, rss1, d.get("reason", "")[:160]))
        # It had the memory under its balloon already: no deflate, the balloon never moved.
        self.assertLess(abs(actual1 - actual0), 8, self.decisions())
        self.assertGreater(lowest[0], actual0 - 8, self.decisions())
        self.assertGreater(rss1, rss0 + 0.5 * alloc, "the guest faulted its memory back in")
        self.assertNotIn("Out of memory", self.lab.console("cold"))


def lying_skip_reason():
    return harness.skip_reason() or client_problem()


@unittest.skipIf(lying_skip_reason(), lying_skip_reason())
class LyingReclaimE2E(unittest.TestCase):
    """One idle 1 GiB guest (free page reporting on, no agent inside). A host-side client holding
    its token (hostile_agent_client.py reclaim) reports for it over the TCP agent listener, as a
    root in the guest could: an idle guest with a reclaimer, first honest (counters still), then
    claiming 200 MiB/s for 8 s that it never reclaimed. plimsolld names bounds
    (agent.reclaim_bounds). The claim must change neither the guest's balloon target nor the
    bounds it is sent, and must show as unconfirmed in the API and the metrics: QEMU's RSS never
    fell."""

    LIE_SECONDS = 8

    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-e2e-")
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"), workload_bin=harness.WORKLOAD)
        cls.lab.start()
        keys = harness.AgentKeys(cls.workdir)
        cls.uuid = str(uuid.uuid4())
        cls.lab.add_guest("liar", workload="idle", memory_mib=1024, guest_uuid=cls.uuid, network=False)
        cls.lab.wait_ready("liar", timeout=120)
        cls.lie_file = os.path.join(cls.workdir, "lie")
        cls.until_file = os.path.join(cls.workdir, "until")
        cls.daemon = harness.Daemon(cls.workdir, cls.lab.uri, agent_keys=keys, guest_memory_budget_bytes=8192 * MIB,
                                    tick="1s", stats_period_seconds=1, policy="pagecache:burst_window_s=0",
                                    **{"agent.reclaim_bounds": "true"})
        cls.client = subprocess.Popen(
            [SYSTEM_PYTHON, CLIENT, "reclaim", "--port", str(cls.daemon.agent_port), "--uuid", cls.uuid,
             "--token", keys.token(cls.uuid), "--max-bytes", str(1024 * MIB), "--lie-file", cls.lie_file,
             "--until-file", cls.until_file, "--claim-mib-per-s", "200", "--wait", "300"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @classmethod
    def tearDownClass(cls):
        stop_client(cls.client, cls.until_file)
        cls.daemon.stop()
        cls.lab.stop()

    def now(self):
        """The guest's target (MiB), the keep it is sent (bytes; None: none, or disabled) and its
        reclaim status."""
        g = self.daemon.guests()[0]["liar"]
        r = g.get("agent", {}).get("reclaim", {})
        keep = int(r["bounds_keep_bytes"]) if r.get("bounds_enabled") and "bounds_keep_bytes" in r else None
        return int(g["target_bytes"]) // MIB, keep, r

    def test_a_claimed_reclaim_gains_nothing_and_shows_unconfirmed(self):
        # Honest first: the daemon names bounds, and the keep settles. The target may still fall
        # (the policy takes from an idle guest step by step): a claim that gained would raise it.
        wait_for("bounds named for the honest agent", lambda: self.now()[1] is not None, 60, 0.5)
        keep0 = harness.wait_still("the honest guest's keep", lambda: self.now()[1], timeout=60, settle=8,
                                   interval=0.5)
        target0 = self.now()[0]
        rss0 = self.lab.dommemstat("liar")["rss"] // 1024
        # The lie: 200 MiB/s claimed for LIE_SECONDS, then counters still again.
        with open(self.lie_file, "w"):
            pass
        seen = []
        t_end = time.monotonic() + self.LIE_SECONDS
        while time.monotonic() < t_end:
            seen.append(self.now()[:2])
            time.sleep(0.5)
        os.unlink(self.lie_file)

        after = []

        def judged():
            after.append(self.now()[:2])
            r = self.now()[2]
            return r if int(r.get("unconfirmed_claims", 0)) >= 1 else None

        # Judged once no claim came for the grace (20 s), at the next tick.
        r = wait_for("the claim judged unconfirmed", judged, 40, 0.5)
        # Then its bounds are paused: the next ack says enabled = false.
        r = wait_for("the bounds paused", lambda: (lambda r: r if r.get("bounds_enabled") is False else None)(
            self.now()[2]), 20, 0.5)
        rss1 = self.lab.dommemstat("liar")["rss"] // 1024
        metrics = self.daemon.metrics()
        m = lambda name: harness.metric(metrics, name, domain="liar", uuid=self.uuid)
        print("\n  liar: target %d MiB keep %s B while honest; (target MiB, keep B) while lying and after: %s; "
              "claimed %d MiB, confirmed %d MiB, unconfirmed %d MiB (%s claims, last %s); QEMU RSS %d -> %d MiB"
              % (target0, keep0, sorted(set(seen + after), key=str), int(r["claimed_bytes"]) // MIB,
                 int(r["confirmed_bytes"]) // MIB, int(r["unconfirmed_bytes"]) // MIB, r["unconfirmed_claims"],
                 r["last_verdict"], rss0, rss1))
        # Gains nothing: the target never above the honest one, the keep the same while it lied,
        # then none (paused).
        self.assertLessEqual(max(t for t, _ in seen + after), target0, seen + after)
        self.assertEqual({k for _, k in seen}, {keep0}, seen)
        self.assertLessEqual({k for _, k in after}, {keep0, None}, after)
        self.assertGreater(float(r.get("bounds_pause_left_seconds", 0)), 500)
        # Shown as claimed, and unconfirmed: at most a quarter of it confirmed by the RSS.
        self.assertGreaterEqual(int(r["claimed_bytes"]), (self.LIE_SECONDS - 2) * 200 * MIB)
        self.assertLess(int(r["confirmed_bytes"]), int(r["claimed_bytes"]) // 4)
        self.assertEqual(r["last_verdict"], "unconfirmed")
        self.assertGreaterEqual(m("plimsoll_guest_reclaim_unconfirmed_claims_total"), 1)
        self.assertGreaterEqual(m("plimsoll_guest_reclaim_claimed_bytes_total"), (self.LIE_SECONDS - 2) * 200 * MIB)
        self.assertIsNone(m("plimsoll_guest_reclaim_keep_bytes"))  # bounds off while paused
        self.assertGreater(m("plimsoll_guest_reclaim_bounds_pause_seconds"), 500)
        self.assertEqual(harness.metric(metrics, "plimsoll_guest_reclaim_state", domain="liar", state="idle",
                                        uuid=self.uuid), 1)
        self.assertIn("reclaim claim unconfirmed guest=liar", self.daemon.read_log())


if __name__ == "__main__":
    unittest.main()
