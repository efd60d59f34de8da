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

READ_THEN_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "read_then_agent.sh")
SINK = os.path.join(harness.BIN, "server", "agent", "plimsoll-agent-sink")
KEEP_MIB = 400
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

    def test_3_bounds_off_stop_it(self):
        with open(self.bounds, "w") as f:
            f.write("off")
        wait_for("the agent seeing the host switch it off", lambda: self.last()["reason"] == "host_disabled", 15, 0.5)
        requested = int(self.last()["requested"])
        time.sleep(5)
        self.assertEqual(int(self.last()["requested"]), requested)


if __name__ == "__main__":
    unittest.main()
