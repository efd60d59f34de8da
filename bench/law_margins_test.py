#!/usr/bin/env python3
"""bench/law_margins.py on made-up decision lines: each part integrated over the time it stood."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import law_margins  # noqa: E402


def line(t, guest, actual, usable, floor, burst, src="libvirt"):
    return ("I 2026-12-07T10:00:%06.3fZ control_loop.cc:884] decision tick=1 guest=%s uuid=u "
            "policy=pagecache direction=hold prev_target=%.1fMiB target=%.1fMiB actual=%.1fMiB max=1024MiB "
            "min=256MiB unused=0MiB usable=%.1fMiB cache=0MiB stats_age=0.0s applied=false "
            "reason=\"pagecache: hold x=0.00 -> %.1fMiB | src=%s actual=%.1fMiB floor=%.1fMiB burst=%.1fMiB\""
            % (t, guest, actual, actual, actual, usable, actual, src, actual, floor, burst))


class MarginsTest(unittest.TestCase):
    def test_each_part_stands_until_the_guests_next_decision(self):
        # 900 MiB with 400 usable: H = 500; floor 800 with 200 of burst: h = 100; 100 above it.
        lines = [line(0, "anon", 900, 400, 800, 200), line(10.24, "anon", 600, 300, 600, 0)]
        parts = law_margins.margins(lines)["anon"]
        self.assertAlmostEqual(parts["seconds"], 10.24)
        self.assertAlmostEqual(parts["hard"], 500 * 10.24 / 1024)
        self.assertAlmostEqual(parts["headroom"], 100 * 10.24 / 1024)
        self.assertAlmostEqual(parts["burst"], 200 * 10.24 / 1024)
        self.assertAlmostEqual(parts["above"], 100 * 10.24 / 1024)
        self.assertAlmostEqual(parts["reclaimed"], 124 * 10.24 / 1024)

    def test_a_burst_counts_only_up_to_the_floor(self):
        # H 100 under a 256 MiB floor clamped to the minimum, with a 400 MiB burst: the burst
        # counts only up to the floor (156 above H), and nothing is left for headroom.
        lines = [line(0, "idle", 256, 156, 256, 400), line(1, "idle", 256, 156, 256, 400)]
        parts = law_margins.margins(lines)["idle"]
        self.assertAlmostEqual(parts["burst"], 156 / 1024)
        self.assertAlmostEqual(parts["headroom"], 0)

    def test_agent_decisions_are_left_out(self):
        lines = [line(0, "a", 900, 400, 800, 200, src="agent"), line(1, "a", 900, 400, 800, 200, src="agent")]
        self.assertEqual(dict(law_margins.margins(lines)), {})


if __name__ == "__main__":
    unittest.main()
