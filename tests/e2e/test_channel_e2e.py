#!/usr/bin/python3
"""plimsoll-agent inside real QEMU guests, reporting over their virtio-serial channels: no guest
networking at all (the guests have no network interface) and no tokens.

One lab for the class, four guests, plimsolld under the static policy (balloons never move, so
a victim's balloon staying put is meaningful), with agent.channel_autoattach on:
  c1     a channel in its XML; its agent is killed (SIGKILL) and started again on request
  liar   a channel; its agent claims c1's UUID
  late   a virtio-serial controller but no channel: plimsolld hot-plugs one, and the agent,
         which keeps looking for its port, starts reporting
  bare   neither controller nor channel: cannot take one, reported with its reason
Tests, in order: reports flow (c1, and late after the hot-plug); the liar is rejected and
counted and changes nothing of c1; plimsolld restarted: the agents report again by themselves;
c1's agent killed: it reports again by itself, late unaffected; the autoattach outcomes in
/metrics. Times to recover are printed.
"""

import os
import tempfile
import time
import unittest
import uuid

import harness
from harness import metric, wait_for

FLAGS = dict(tick="1s", stats_period_seconds=1, host_reserve_bytes=0, policy="static",
             agent_stale_after="4s", channel_autoattach="true")
CHANNEL = harness.labmod.AGENT_CHANNEL_NAME
MEMORY_MIB = 512


def channel_agent(interval="1s", extra_args=(), kill_file=None):
    """add_guest() arguments that run plimsoll-agent over the guest's virtio-serial port."""
    cmd = ["plimsoll.agent_bin=" + os.path.realpath(harness.AGENT),
           "plimsoll.agent_server=virtio-serial:" + CHANNEL, "plimsoll.agent_interval=" + interval]
    if extra_args:
        cmd.append("plimsoll.agent_args=" + ",".join(extra_args))
    if kill_file:
        cmd.append("plimsoll.agent_kill_file=" + kill_file)
    return dict(run=harness.RUN_AGENT, cmdline_extra=" ".join(cmd))


@unittest.skipIf(harness.skip_reason(), harness.skip_reason())
class ChannelE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-chan-e2e-")
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"), workload_bin=harness.WORKLOAD)
        cls.lab.start()
        cls.uuids = {n: str(uuid.uuid4()) for n in ("c1", "liar", "late", "bare")}
        cls.kill_file = os.path.join(cls.workdir, "kill-c1-agent")
        with open(cls.kill_file, "w") as f:
            f.write("0\n")
        liar_uuid_file = os.path.join(cls.workdir, "liar-claims")
        with open(liar_uuid_file, "w") as f:
            f.write(cls.uuids["c1"] + "\n")
        backoff = ("--max_backoff=2s",)
        common = dict(workload="idle", memory_mib=MEMORY_MIB, network=False)
        cls.lab.add_guest("c1", guest_uuid=cls.uuids["c1"], **common,
                          **channel_agent(extra_args=backoff, kill_file=cls.kill_file))
        cls.lab.add_guest("liar", guest_uuid=cls.uuids["liar"], **common,
                          **channel_agent(extra_args=backoff + ("--uuid_file=" + liar_uuid_file,)))
        cls.lab.add_guest("late", guest_uuid=cls.uuids["late"], agent_channel=False, **common,
                          **channel_agent(extra_args=backoff))
        cls.lab.add_guest("bare", guest_uuid=cls.uuids["bare"], agent_channel=False, serial_controller=False,
                          **common)
        for n in ("c1", "liar", "late", "bare"):
            cls.lab.wait_ready(n, timeout=120)
        cls.socket_dir = os.path.join(cls.workdir, "chan")
        cls.daemon = cls.start_daemon()
        cls.t_daemon = time.monotonic()

    @classmethod
    def start_daemon(cls):
        return harness.Daemon(cls.workdir, cls.lab.uri, channel_socket_dir=cls.socket_dir, **FLAGS)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        cls.lab.stop()

    def guest(self, name):
        return self.daemon.guests()[0][name]

    def reporting(self, name):
        return harness.agent_reporting(self.daemon, name)

    def test_1_reports_flow_without_networking(self):
        for name in ("c1", "liar", "late", "bare"):
            self.assertEqual(self.lab.virsh("domiflist", name).count("user"), 0, "%s has a network interface" % name)
        for name in ("c1", "late"):
            g = wait_for(name + " reporting over its channel", lambda: self.reporting(name), timeout=60)
            self.assertEqual(g["stats"]["active_file"]["provenance"], "PROVENANCE_AGENT")
            print("\n  %s reporting %.1fs after plimsolld start" % (name, time.monotonic() - self.t_daemon))
        text = self.daemon.metrics()
        self.assertGreaterEqual(metric(text, "plimsoll_agent_channels", state="connected"), 3)
        self.assertGreater(metric(text, "plimsoll_agent_reports_total"), 0)
        self.assertEqual(metric(text, "plimsoll_agent_channel_attach_total", result="attached"), 1)
        self.assertIn("agent channel connected uuid=" + self.uuids["c1"], self.daemon.read_log())

    def test_2_report_for_another_guest_changes_nothing_of_it(self):
        wait_for("channel_identity_mismatch counted", lambda: (metric(
            self.daemon.metrics(), "plimsoll_agent_reports_rejected_total", reason="channel_identity_mismatch")
            or 0) > 0, timeout=60)
        wait_for("c1 reporting", lambda: self.reporting("c1"), timeout=30)
        c1 = self.guest("c1")
        liar = self.guest("liar")
        self.assertEqual(c1["agent"].get("last_reject_reason", ""), "")
        self.assertTrue(c1["agent"]["connected"])
        self.assertFalse(liar.get("agent", {}).get("connected", False))
        self.assertEqual(liar.get("agent", {}).get("last_reject_reason", ""), "channel_identity_mismatch")
        self.assertEqual(int(c1["target_bytes"]), MEMORY_MIB << 20)
        self.assertAlmostEqual(self.lab.dommemstat("c1")["actual"] * 1024, MEMORY_MIB << 20, delta=1 << 20)
        self.assertIn("channel_identity_mismatch", self.daemon.read_log())

    def test_3_agents_report_again_after_daemon_restart(self):
        self.assertEqual(self.daemon.stop(), 0)
        t0 = time.monotonic()
        type(self).daemon = self.start_daemon()
        for name in ("c1", "late"):
            wait_for(name + " reporting again", lambda: self.reporting(name), timeout=60)
            print("\n  %s reporting again %.1fs after plimsolld was restarted" % (name, time.monotonic() - t0))
        # A fresh daemon counts from zero: reports arrived on the new daemon, not leftovers.
        self.assertGreater(int(self.guest("c1")["agent"]["reports_accepted"]), 0)

    def test_4_killed_agent_reports_again_by_itself(self):
        wait_for("c1 reporting", lambda: self.reporting("c1"), timeout=30)
        kills = self.lab.console("c1").count("PLIMSOLL-AGENT killed")
        with open(self.kill_file, "w") as f:
            f.write("1\n")
        starts = self.lab.console("c1").count("plimsoll-agent starting")
        wait_for("c1's agent killed", lambda: self.lab.console("c1").count("PLIMSOLL-AGENT killed") > kills,
                 timeout=20, interval=0.1)
        t0 = time.monotonic()
        accepted = int(self.guest("c1")["agent"]["reports_accepted"])
        closed = metric(self.daemon.metrics(), "plimsoll_agent_channel_closed_total", reason="daemon_closed") or 0
        # The new process takes seconds to load over 9p under TCG; the channel's part starts then.
        wait_for("c1's new agent started", lambda: self.lab.console("c1").count("plimsoll-agent starting") > starts,
                 timeout=60, interval=0.1)
        t1 = time.monotonic()
        wait_for("c1 reporting from its new agent",
                 lambda: int(self.guest("c1")["agent"]["reports_accepted"]) > accepted + 1 and self.reporting("c1"),
                 timeout=60, interval=0.2)
        t2 = time.monotonic()
        print("\n  c1 reporting again %.1fs after its agent was killed (new agent process up after %.1fs, "
              "reporting %.1fs after that)" % (t2 - t0, t1 - t0, t2 - t1))
        # The new agent's HTTP/2 session began inside the old one: plimsolld dropped and re-made
        # the connection (counted), and the other guest did not notice.
        self.assertGreater(metric(self.daemon.metrics(), "plimsoll_agent_channel_closed_total",
                                  reason="daemon_closed") or 0, closed)
        self.assertTrue(self.reporting("late"))

    def test_5_autoattach_outcomes_are_reported(self):
        text = self.daemon.metrics()
        # Attached by the first daemon; the second found it in the live XML.
        self.assertIn(CHANNEL, self.lab.virsh("dumpxml", "late"))
        self.assertNotIn("virtio-serial", self.lab.virsh("dumpxml", "bare"))
        self.assertEqual(metric(text, "plimsoll_agent_channels", state="no_controller"), 1)
        self.assertEqual(metric(text, "plimsoll_agent_channel_attach_total", result="no_controller"), 1)
        log = self.daemon.read_log()
        self.assertIn("agent channel cannot be attached: uuid=%s" % self.uuids["bare"], log)
        self.assertIn("reason=no_virtio_serial_controller", log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
