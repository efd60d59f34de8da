"""Table tests of the inventory arithmetic (inventory.py)."""

import struct
import unittest

from plimsoll_placement import inventory
from plimsoll_placement.inventory import MIB, Inventory, Line


def inv(total=65536, reserved=512, min_unit=1, max_unit=None, step=1, ratio=1.5):
    return Inventory(total, reserved, min_unit, total if max_unit is None else max_unit, step, ratio)


def ok(offered_mib):
    return Line("ok", offered_mib * MIB, 7, "")


def f32(x):
    """x as MySQL's FLOAT column keeps it."""
    return struct.unpack("f", struct.pack("f", x))[0]


class RoomTest(unittest.TestCase):
    def test_table(self):
        #  offered MiB, pending MiB, min_unit, step -> room MiB
        cases = [
            (1000, 0, 1, 1, 1000),
            (1000, 300, 1, 1, 700),       # pending allocations come off the offer
            (1000, 1500, 1, 1, 0),        # never negative
            (1000, 0, 1, 256, 768),       # rounded down to step_size
            (1023, 0, 1, 512, 512),
            (511, 0, 1, 512, 0),
            (100, 0, 128, 1, 0),          # below min_unit: no allocation fits, offer none
            (128, 0, 128, 1, 128),
            (0, 0, 1, 1, 0),
        ]
        for offered, pending, min_unit, step, want in cases:
            with self.subTest(offered=offered, pending=pending, min_unit=min_unit, step=step):
                got = inventory.room_mb(offered * MIB, pending, inv(min_unit=min_unit, step=step))
                self.assertEqual(got, want)

    def test_partial_mib_is_not_offered(self):
        self.assertEqual(inventory.room_mb(10 * MIB - 1, 0, inv()), 9)


class PlanTest(unittest.TestCase):
    def test_table(self):
        #  line, inventory, used, pending -> action, capacity, free
        cases = [
            # 64 GiB host, 512 MiB reserved, 20 GiB allocated, 8 GiB offered: capacity 28 GiB.
            (ok(8192), inv(), 20480, 0, "update", 28672, 8192),
            # Already there: nothing to PUT.
            (ok(8192), inv(ratio=(28672 + 0.5) / 65024), 20480, 0, "unchanged", 28672, 8192),
            # Over the line (offered 0): capacity = used, free 0; never below used.
            (ok(0), inv(), 20480, 0, "update", 20480, 0),
            # Nothing allocated and nothing offered: capacity 0 (microversion 1.26 accepts it).
            (ok(0), inv(), 0, 0, "update", 0, 0),
            # used above what the ratio gave before (overcommitted): capacity rises to used.
            (ok(0), inv(ratio=0.1), 30000, 0, "update", 30000, 0),
            # A consumer not yet running here: its 4 GiB come off the 8 GiB offered.
            (ok(8192), inv(), 24576, 4096, "update", 28672, 4096),
            # step_size 1024 on a 1500 MiB offer: 1024 free.
            (ok(1500), inv(step=1024), 2048, 0, "update", 3072, 1024),
        ]
        for line, i, used, pending, action, capacity, free in cases:
            with self.subTest(line=line, inv=i, used=used, pending=pending):
                p = inventory.plan(line, i, used, pending)
                self.assertEqual((p.action, p.capacity_mb, p.room_mb), (action, capacity, free))
                if action == "update":
                    after = i._replace(allocation_ratio=p.allocation_ratio)
                    self.assertEqual(inventory.capacity_mb(after), capacity)
                    self.assertGreaterEqual(inventory.capacity_mb(after), used)

    def test_unusable_line_changes_nothing(self):
        for state in ("stale", "unreachable", "unimplemented", "error"):
            with self.subTest(state=state):
                # A stale line may still carry numbers: they are never used.
                p = inventory.plan(Line(state, 8192 * MIB, 3, "libvirt disconnected"), inv(), 100, 0)
                self.assertEqual(p.action, "skip")
                self.assertIsNone(p.allocation_ratio)
                self.assertIn(state, p.reason)

    def test_no_inventory_or_nothing_to_scale(self):
        self.assertEqual(inventory.plan(ok(10), None, 0, 0).action, "skip")
        self.assertEqual(inventory.plan(ok(10), inv(total=512, reserved=512), 0, 0).action, "skip")

    def test_ratio_survives_float32_storage(self):
        # MySQL keeps allocation_ratio as a 32-bit float: the capacity must not move.
        for total in (1024, 65536, 1048576, 4194304):
            for used, offered in ((0, 0), (0, 1), (total // 3, total // 7), (total * 2, 5), (total - 600, 77)):
                with self.subTest(total=total, used=used, offered=offered):
                    i = inv(total=total, reserved=512)
                    p = inventory.plan(ok(offered), i, used, 0)
                    stored = i._replace(allocation_ratio=f32(p.allocation_ratio))
                    self.assertEqual(inventory.capacity_mb(stored), used + offered)

    def test_pending(self):
        allocations = {"AAAA": 1024, "bbbb": 2048, "cccc": 512}
        self.assertEqual(inventory.pending_mb(allocations, {"aaaa", "bbbb"}), 512)
        self.assertEqual(inventory.pending_mb(allocations, set()), 3584)


if __name__ == "__main__":
    unittest.main()
