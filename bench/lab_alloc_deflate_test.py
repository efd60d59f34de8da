#!/usr/bin/env python3
"""bench/lab_alloc_deflate.py on made-up runs: a balloon grown after an allocation, or not."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_alloc_deflate  # noqa: E402

MIB = 2**20


def run(policy, balloon_by_t, alloc_start=60.0, seconds=1.2):
    return {"policy": policy, "rep": 0,
            "guests": {"reader": {"alloc": {"start_t": alloc_start, "seconds": seconds}}, "hot": {}},
            "samples": [{"t": t, "reader": mib * MIB, "hot": 1024 * MIB} for t, mib in balloon_by_t]}


class AllocDeflateTest(unittest.TestCase):
    def test_a_balloon_already_large_enough_grew_nothing(self):
        r = run("pagecache+reclaim", [(56, 1024), (58, 1024), (62, 693), (64, 693)])
        self.assertEqual(list(lab_alloc_deflate.rows([r])), [("pagecache+reclaim", 0, "reader", 1.2, 0.0)])

    def test_a_deflate_after_the_allocation_is_its_growth(self):
        r = run("pagecache", [(58, 262), (62, 270), (64, 643), (66, 662), (95, 900)])
        # 262 -> 662 within the 30 s; the 900 at 95 s is after the window.
        self.assertEqual(list(lab_alloc_deflate.rows([r]))[0][4], 400.0)

    def test_no_samples_around_it_is_unknown(self):
        r = run("pagecache", [(10, 500), (20, 500)])
        self.assertIsNone(list(lab_alloc_deflate.rows([r]))[0][4])

    def test_guests_without_an_allocation_are_left_out(self):
        r = run("pagecache", [(58, 262), (62, 270)])
        self.assertEqual([row[2] for row in lab_alloc_deflate.rows([r])], ["reader"])


if __name__ == "__main__":
    unittest.main()
