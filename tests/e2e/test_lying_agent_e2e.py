#!/usr/bin/python3
"""A lying agent cannot make plimsolld shrink a neighbour for it, on real
QEMU guests under pagecache.

Two 1 GiB guests under a private libvirtd:
  neighbour  re-reads a file (its hot cache is memory the share-out could take), with the real
             plimsoll-agent on its virtio-serial port
  liar       idle; a host-side client holding its token (tests/e2e/hostile_agent_client.py
             inflate) reports for it over the TCP agent listener, as a root in the guest could
The liar is ballooned to 400 MiB before plimsolld starts, the budget leaves 32 MiB free, and
the liar claims 900 MiB of AnonPages: hard demand above its size, which the share-out pays for
from the neighbours when it is real.
libvirt's balloon stats (MemAvailable) show the liar idle, so the neighbours pay at most for what
libvirt sees (its own hard demand, actual - MemAvailable, plus the headroom: a liar squeezed to
its min is short of that by a little), and the rest waits for free memory
(`hard_demand_unconfirmed`, `hard_demand_seen_to=` in its reasons). The figures seen are printed.
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

GUEST_MIB = 1024
FREE_MIB = 32
LIAR_MIB = 400
# pagecache's headroom for a 1 GiB guest (LawHeadroom: max(128 MiB, fraction x max)).
HEADROOM_MIB = 128
FLAGS = dict(tick="1s", stats_period_seconds=1, stale_after="5s", host_reserve_bytes=0, policy="pagecache",
             agent_stale_after="4s", log_every_decision="true")
DECISION_RE = re.compile(r"decision tick=(\d+) guest=(\S+) .* prev_target=([\d.]+)MiB target=([\d.]+)MiB .* "
                         r"reason=\"(.*)\"$")


def skip_reason():
    return harness.skip_reason() or client_problem()


@unittest.skipIf(skip_reason(), skip_reason())
class LyingAgentE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-liar-e2e-")
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"), workload_bin=harness.WORKLOAD)
        cls.lab.start()
        cls.keys = harness.AgentKeys(cls.workdir)
        cls.liar_uuid = str(uuid.uuid4())
        cls.lab.add_guest("liar", memory_mib=GUEST_MIB, guest_uuid=cls.liar_uuid, network=False)
        cls.lab.add_guest("neighbour", workload="hot", memory_mib=GUEST_MIB, network=False,
                          **harness.channel_agent(interval="1s"))
        for n in ("liar", "neighbour"):
            cls.lab.wait_ready(n, timeout=120)
        # The liar starts below its ceiling, where it could grow (plimsolld adopts the balloon
        # as it finds it), and the budget leaves FREE_MIB free: any more growth is paid by the
        # neighbour, which holds everything it has.
        cls.lab.setmem("liar", LIAR_MIB)
        cls.lab.wait_actual("liar", LIAR_MIB, timeout=60)
        # libvirt's own idea of the balloon (what plimsolld adopts as the target) follows QEMU's
        # balloon events, throttled to one a second: wait until it has caught up too.
        def used_mib():
            m = re.search(r"Used memory:\s+(\d+) KiB", cls.lab.virsh("dominfo", "liar"))
            return int(m.group(1)) // 1024 if m else -1
        wait_for("libvirt's balloon size of the liar at %d MiB" % LIAR_MIB,
                 lambda: abs(used_mib() - LIAR_MIB) <= LIAR_MIB * 0.05, timeout=30, interval=0.5)
        cls.lie_file = os.path.join(cls.workdir, "lie")
        cls.until_file = os.path.join(cls.workdir, "until")
        with open(cls.lie_file, "w"):
            pass
        cls.budget_mib = LIAR_MIB + GUEST_MIB + FREE_MIB
        cls.daemon = harness.Daemon(cls.workdir, cls.lab.uri, agent_keys=cls.keys,
                                    guest_memory_budget_bytes=cls.budget_mib * MIB, **FLAGS)
        cls.client = subprocess.Popen(
            [SYSTEM_PYTHON, CLIENT, "inflate", "--port", str(cls.daemon.agent_port), "--uuid", cls.liar_uuid,
             "--token", cls.keys.token(cls.liar_uuid), "--max-bytes", str(GUEST_MIB * MIB),
             "--anon-mib", "900", "--lie-file", cls.lie_file, "--until-file", cls.until_file, "--wait", "600"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @classmethod
    def tearDownClass(cls):
        stop_client(cls.client, cls.until_file)
        cls.daemon.stop()
        cls.lab.stop()

    def guests(self):
        return self.daemon.guests()[0]

    def decisions_since(self, line, name):
        out = []
        for l in self.daemon.read_log().splitlines()[line:]:
            m = DECISION_RE.search(l)
            if m and m.group(2) == name:
                out.append(dict(tick=int(m.group(1)), prev=float(m.group(3)), target=float(m.group(4)),
                                reason=m.group(5)))
        return out

    def test_1_a_claim_libvirt_does_not_see_takes_nothing_from_a_neighbour(self):
        wait_for("the liar's claim read (its floor at its ceiling)", lambda: "floor=1024MiB" in
                 self.guests().get("liar", {}).get("last_decision", {}).get("reason", ""), timeout=60, interval=0.3)
        liar_usable = self.lab.dommemstat("liar").get("usable", 0) // 1024
        harness.wait_ticks(self.daemon, 15)
        liar = self.decisions_since(0, "liar")
        near = self.decisions_since(0, "neighbour")
        unconfirmed = [d for d in liar if "hard_demand_unconfirmed" in d["reason"]]
        seen_to = [d for d in liar if "hard_demand_seen_to=" in d["reason"]]
        # Taken from the neighbour below where it was: memory it lost to the budget round (its own
        # growth trimmed by the budget shows as taken= too, on a target that did not go down).
        taken = [d for d in near if " taken=" in d["reason"] and d["target"] < d["prev"] - 1]
        granted = [float(re.search(r" granted=([\d.]+)MiB", d["reason"]).group(1)) for d in liar
                   if " granted=" in d["reason"]]
        end = {n: int(g["target_bytes"]) for n, g in self.guests().items()}
        print("\n  budget %d MiB (%d free); the liar, at %d MiB with libvirt usable %d MiB, claims 900 MiB "
              "AnonPages: %d of its %d decisions say hard_demand_unconfirmed, %d hard_demand_seen_to; liar -> %d MiB, "
              "neighbour %d -> %d MiB, %d of its decisions shrank it with taken=; granted to the liar %s MiB" % (
                  self.budget_mib, FREE_MIB, LIAR_MIB, liar_usable, len(unconfirmed), len(liar), len(seen_to),
                  end["liar"] // MIB, GUEST_MIB, end["neighbour"] // MIB, len(taken), granted))
        self.assertGreater(liar_usable, HEADROOM_MIB, "libvirt sees the idle liar short of memory: no test")
        # Without the check, the share-out pays the claim (1024 - 400 MiB) from the neighbour,
        # a quarter of its ceiling a tick. With it, the liar grows only into memory that is free
        # (what the neighbour's own steps release included: a liar may take free memory first).
        self.assertEqual(taken, [], "the neighbour paid for the liar's claim")
        self.assertTrue(unconfirmed)
        self.assertEqual(seen_to, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
