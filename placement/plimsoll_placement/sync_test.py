"""The sync loop against a fake Placement and a fake plimsolld: what is PUT, when nothing is,
409 handling, backoff, counting, and one log line per change of trouble."""

import logging
import unittest

from plimsoll_placement import metrics as metrics_mod
from plimsoll_placement import sync
from plimsoll_placement.inventory import MIB, Line
from plimsoll_placement.placement_api import PlacementError

RP = "11111111-2222-3333-4444-555555555555"


class FakeLine:
    def __init__(self):
        self.line = Line("ok", 8192 * MIB, 1, "")
        self.running = set()

    def read(self):
        return self.line, set(self.running)


class FakePlacement:
    """One provider with a MEMORY_MB record; generation moves on every write, like Placement."""

    def __init__(self):
        self.generation = 3
        self.record = dict(total=65536, reserved=512, min_unit=1, max_unit=65536, step_size=1,
                           allocation_ratio=1.5)
        self.allocations = {}
        self.puts = []
        self.fail = None             # a PlacementError to raise on every call
        self.conflicts_left = 0      # 409s to answer before accepting a PUT
        self.names = {"compute-1": RP}

    def _check(self):
        if self.fail:
            raise self.fail

    def provider_uuid(self, name):
        self._check()
        if name not in self.names:
            raise PlacementError("provider_not_found", "no provider %r" % name)
        return self.names[name]

    def memory_allocations(self, rp):
        self._check()
        return dict(self.allocations)

    def memory_inventory(self, rp):
        self._check()
        return self.generation, dict(self.record) if self.record else None

    def put_memory_inventory(self, rp, generation, record):
        self._check()
        if self.conflicts_left:
            self.conflicts_left -= 1
            self.generation += 1   # someone else wrote
            raise PlacementError("conflict", "409")
        if generation != self.generation:
            raise PlacementError("conflict", "409 stale generation %d" % generation)
        self.puts.append(dict(record))
        self.record = dict(record)
        self.generation += 1

    def capacity(self):
        r = self.record
        return int((r["total"] - r["reserved"]) * r["allocation_ratio"])


class SyncTest(unittest.TestCase):
    def setUp(self):
        self.line, self.placement, self.metrics = FakeLine(), FakePlacement(), metrics_mod.Metrics()
        self.syncer = sync.Syncer(self.line, self.placement, self.metrics, "compute-1", "", interval=2,
                                  backoff_max=30)

    def test_puts_offer_keeping_nova_fields(self):
        self.placement.allocations = {"g1": 2048}
        self.line.running = {"g1"}
        r = self.syncer.sync(100)
        self.assertTrue(r.ok)
        self.assertEqual(len(self.placement.puts), 1)
        put = self.placement.puts[0]
        for k in ("total", "reserved", "min_unit", "max_unit", "step_size"):
            self.assertEqual(put[k], {"total": 65536, "reserved": 512, "min_unit": 1, "max_unit": 65536,
                                      "step_size": 1}[k], k)
        self.assertEqual(self.placement.capacity(), 2048 + 8192)
        self.assertEqual(self.metrics.get("plimsoll_placement_offered_bytes"), 8192 * MIB)
        self.assertEqual(self.metrics.get("plimsoll_placement_last_sync_timestamp_seconds"), 100)
        self.assertEqual(self.metrics.get("plimsoll_placement_updates_total"), 1)

    def test_only_changes_are_put(self):
        self.syncer.sync(1)
        self.syncer.sync(2)
        self.assertEqual(len(self.placement.puts), 1)
        self.line.line = Line("ok", 4096 * MIB, 2, "")
        self.syncer.sync(3)
        self.assertEqual(len(self.placement.puts), 2)
        self.assertEqual(self.placement.capacity(), 4096)
        self.assertEqual(self.metrics.get("plimsoll_placement_last_sync_timestamp_seconds"), 3)

    def test_unusable_line_leaves_placement_and_logs_once(self):
        self.syncer.sync(1)
        before = dict(self.placement.record)
        self.line.line = Line("stale", 0, 5, "libvirt disconnected")
        with self.assertLogs("plimsoll-placement", logging.INFO) as logs:
            for t in range(2, 12):
                r = self.syncer.sync(t)
                self.assertFalse(r.ok)
            self.line.line = Line("unreachable", 0, 0, "UNAVAILABLE: connect failed")
            self.syncer.sync(12)
            self.syncer.sync(13)
            logging.getLogger("plimsoll-placement").info("end")
        said = [m for m in logs.output if "no usable line" in m]
        self.assertEqual(len(said), 2, logs.output)  # stale once, unreachable once
        self.assertEqual(self.placement.record, before)
        self.assertEqual(len(self.placement.puts), 1)
        self.assertEqual(self.metrics.get("plimsoll_placement_line_unusable", "stale"), 0)
        self.assertEqual(self.metrics.get("plimsoll_placement_line_unusable", "unreachable"), 1)
        self.assertEqual(self.metrics.get("plimsoll_placement_line_unusable_total", "stale"), 10)
        self.assertEqual(self.metrics.get("plimsoll_placement_last_sync_timestamp_seconds"), 1)
        self.assertEqual(self.syncer.next_delay(), 2)  # not Placement's fault: no backoff
        self.line.line = Line("ok", 1024 * MIB, 9, "")
        self.assertTrue(self.syncer.sync(14).ok)
        self.assertEqual(self.metrics.get("plimsoll_placement_line_unusable", "unreachable"), 0)
        self.assertEqual(self.placement.capacity(), 1024)

    def test_conflict_rereads_and_retries(self):
        self.placement.conflicts_left = 2
        r = self.syncer.sync(1)
        self.assertTrue(r.ok)
        self.assertEqual(len(self.placement.puts), 1)
        self.assertEqual(self.metrics.get("plimsoll_placement_conflicts_total"), 2)

    def test_conflict_that_never_ends_is_a_failure(self):
        self.placement.conflicts_left = 100
        r = self.syncer.sync(1)
        self.assertFalse(r.ok)
        self.assertEqual(r.reason, "conflict")
        self.assertEqual(self.metrics.get("plimsoll_placement_sync_failures_total", "conflict"), 1)

    def test_allocation_between_read_and_put_is_counted(self):
        # An allocation lands after the read: Placement's generation moved, the PUT gets 409,
        # and the re-read sees the new usage, so the capacity covers it.
        orig = self.placement.memory_inventory
        state = {"n": 0}

        def racing_inventory(rp):
            g, rec = orig(rp)
            state["n"] += 1
            if state["n"] == 1:
                self.placement.allocations["new-guest"] = 1024
                self.placement.generation += 1
            return g, rec
        self.placement.memory_inventory = racing_inventory
        self.assertTrue(self.syncer.sync(1).ok)
        # used 1024 (pending: not running), offered 8192 - pending 1024 = 7168 free.
        self.assertEqual(self.placement.capacity(), 1024 + 7168)

    def test_placement_down_backs_off_counts_and_recovers(self):
        self.syncer.sync(1)
        put_before = dict(self.placement.record)
        self.placement.fail = PlacementError("unreachable", "connection refused")
        delays = []
        with self.assertLogs("plimsoll-placement", logging.INFO) as logs:
            for t in range(2, 9):
                self.assertFalse(self.syncer.sync(t).ok)
                delays.append(self.syncer.next_delay())
        self.assertEqual(delays, [4, 8, 16, 30, 30, 30, 30])
        self.assertEqual(self.metrics.get("plimsoll_placement_sync_failures_total", "unreachable"), 7)
        self.assertEqual(len([m for m in logs.output if "sync failed" in m]), 3)  # 1st, 2nd, 4th
        self.assertEqual(self.placement.record, put_before)
        self.placement.fail = None
        self.line.line = Line("ok", 2048 * MIB, 3, "")
        self.assertTrue(self.syncer.sync(10).ok)
        self.assertEqual(self.syncer.next_delay(), 2)
        self.assertEqual(self.placement.capacity(), 2048)

    def test_provider_not_found_names_the_option(self):
        self.syncer.rp_name = "nope"
        r = self.syncer.sync(1)
        self.assertEqual(r.reason, "provider_not_found")

    def test_no_memory_inventory_is_a_failure_not_a_crash(self):
        self.placement.record = None
        r = self.syncer.sync(1)
        self.assertEqual((r.ok, r.reason), (False, "no_inventory"))

    def test_metrics_text(self):
        self.syncer.sync(5)
        text = self.metrics.text()
        self.assertIn("plimsoll_placement_offered_bytes %d\n" % (8192 * MIB), text)
        self.assertIn('plimsoll_placement_line_unusable{kind="stale"} 0', text)
        self.assertIn("# TYPE plimsoll_placement_updates_total counter", text)


if __name__ == "__main__":
    unittest.main()
