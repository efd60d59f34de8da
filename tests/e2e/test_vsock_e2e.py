#!/usr/bin/python3
"""plimsoll-agent inside real QEMU guests, reporting over vsock: guests with a
virtio vsock device of a fixed CID and no network interface, agents dialling vsock:2:PORT
without a token, plimsolld with only agent.vsock_port (no TCP listener, no virtio-serial).

  v1     CID A; its agent reports as itself
  liar   CID B; its agent claims v1's UUID
Tests: reports flow as the CID's domain (provenance agent, accepted connections in /metrics);
the liar is rejected (channel_identity_mismatch), counted, and changes nothing of v1.

Skips where the host has no /dev/vhost-vsock (modprobe vhost_vsock), as on the development
machine, and where the lab's guests do not load the vsock transport (tests/lab/lab.py,
VSOCK_GUEST_MODULE): then nothing here has run.
"""

import os
import random
import tempfile
import time
import unittest
import uuid

import harness
from harness import metric, wait_for

MEMORY_MIB = 512


def skip_reason():
    r = harness.skip_reason()
    if r:
        return r
    if not os.path.exists("/dev/vhost-vsock"):
        return "/dev/vhost-vsock is missing: this host cannot give guests vsock devices (modprobe vhost_vsock)"
    if not harness.labmod.guest_has_vsock():
        return ("the lab's guests do not load the vsock transport (%s is not in tests/lab/lab.py "
                "GUEST_MODULES)" % harness.labmod.VSOCK_GUEST_MODULE)
    return None


def vsock_agent(port, extra_args=()):
    """add_guest() arguments that run plimsoll-agent over vsock to the host (CID 2)."""
    cmd = ["plimsoll.agent_bin=" + os.path.realpath(harness.AGENT),
           "plimsoll.agent_server=vsock:2:%d" % port, "plimsoll.agent_interval=1s"]
    if extra_args:
        cmd.append("plimsoll.agent_args=" + ",".join(extra_args))
    return dict(run=harness.RUN_AGENT, cmdline_extra=" ".join(cmd))


@unittest.skipIf(skip_reason(), skip_reason())
class VsockE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-vsock-e2e-")
        cls.port = random.randint(20000, 60000)
        # CIDs are host-wide: pick ones other guests on this host are unlikely to hold.
        base = random.randint(100000, 4000000)
        cls.cids = {"v1": base, "liar": base + 1}
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"), workload_bin=harness.WORKLOAD)
        cls.lab.start()
        cls.uuids = {n: str(uuid.uuid4()) for n in ("v1", "liar")}
        liar_uuid_file = os.path.join(cls.workdir, "liar-claims")
        with open(liar_uuid_file, "w") as f:
            f.write(cls.uuids["v1"] + "\n")
        common = dict(workload="idle", memory_mib=MEMORY_MIB, network=False, agent_channel=False)
        cls.lab.add_guest("v1", guest_uuid=cls.uuids["v1"], vsock_cid=cls.cids["v1"], **common,
                          **vsock_agent(cls.port, ("--max_backoff=2s",)))
        cls.lab.add_guest("liar", guest_uuid=cls.uuids["liar"], vsock_cid=cls.cids["liar"], **common,
                          **vsock_agent(cls.port, ("--max_backoff=2s", "--uuid_file=" + liar_uuid_file)))
        for n in ("v1", "liar"):
            cls.lab.wait_ready(n, timeout=120)
        cls.daemon = harness.Daemon(cls.workdir, cls.lab.uri, tick="1s", stats_period_seconds=1,
                                    host_reserve_bytes=0, policy="static", agent_stale_after="4s",
                                    agent_listen="", channel_name="", vsock_port=str(cls.port))
        cls.t_daemon = time.monotonic()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        cls.lab.stop()

    def guest(self, name):
        return self.daemon.guests()[0][name]

    def reporting(self, name):
        return harness.agent_reporting(self.daemon, name)

    def test_1_reports_flow_over_vsock_as_the_cids_domain(self):
        for name in ("v1", "liar"):
            self.assertIn("address='%d'" % self.cids[name], self.lab.virsh("dumpxml", name))
        g = wait_for("v1 reporting over vsock", lambda: self.reporting("v1"), timeout=90)
        self.assertEqual(g["stats"]["active_file"]["provenance"], "PROVENANCE_AGENT")
        print("\n  v1 reporting over vsock %.1fs after plimsolld start" % (time.monotonic() - self.t_daemon))
        text = self.daemon.metrics()
        self.assertEqual(metric(text, "plimsoll_agent_vsock_domains"), 2)
        self.assertGreaterEqual(metric(text, "plimsoll_agent_vsock_connections_total", result="accepted"), 1)
        self.assertIn("agent vsock connection accepted: cid=%d uuid=%s" % (self.cids["v1"], self.uuids["v1"]),
                      self.daemon.read_log())

    def test_2_report_for_another_guest_changes_nothing_of_it(self):
        wait_for("channel_identity_mismatch counted", lambda: (metric(
            self.daemon.metrics(), "plimsoll_agent_reports_rejected_total", reason="channel_identity_mismatch")
            or 0) > 0, timeout=60)
        wait_for("v1 reporting", lambda: self.reporting("v1"), timeout=30)
        v1 = self.guest("v1")
        liar = self.guest("liar")
        self.assertEqual(v1["agent"].get("last_reject_reason", ""), "")
        self.assertFalse(liar.get("agent", {}).get("connected", False))
        self.assertEqual(liar.get("agent", {}).get("last_reject_reason", ""), "channel_identity_mismatch")
        self.assertEqual(int(v1["target_bytes"]), MEMORY_MIB << 20)


if __name__ == "__main__":
    unittest.main()
