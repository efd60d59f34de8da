"""Tests of bench/lab_mix_gen.py: deterministic per seed, everything in range, budget feasible."""

import io
import json
import os
import subprocess
import sys
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_mix_gen as gen  # noqa: E402

SEEDS = list(range(0, 300))


class GenerateTest(unittest.TestCase):
    def test_same_seed_same_mix(self):
        for seed in (0, 1, 101, 104, 2**40):
            with self.subTest(seed=seed):
                self.assertEqual(gen.generate(seed), gen.generate(seed))
                self.assertEqual(json.dumps(gen.generate(seed, 90)), json.dumps(gen.generate(seed, 90)))

    def test_independent_of_the_global_random_state(self):
        import random
        random.seed(1)
        a = gen.generate(7)
        random.seed(2)
        random.random()
        self.assertEqual(a, gen.generate(7))

    def test_the_same_in_a_fresh_interpreter(self):
        # random.Random(seed) with an int seed is stable across processes (no hash randomisation).
        out = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                           "lab_mix_gen.py"), "--json", "5", "6"],
                             check=True, capture_output=True, text=True,
                             env=dict(os.environ, PYTHONHASHSEED="123")).stdout
        self.assertEqual(json.loads(out), [gen.generate(5), gen.generate(6)])

    def test_seeds_give_different_mixes(self):
        mixes = {json.dumps(gen.generate(s)["guests"]) for s in range(50)}
        self.assertGreater(len(mixes), 45)

    def test_sizes_counts_and_kinds_in_range(self):
        for seed in SEEDS:
            m = gen.generate(seed, seconds=150)
            with self.subTest(seed=seed):
                self.assertTrue(3 <= len(m["guests"]) <= 5)
                names = [g["name"] for g in m["guests"]]
                self.assertEqual(len(set(names)), len(names))
                for g in m["guests"]:
                    mem = g["memory_mib"]
                    self.assertTrue(512 <= mem <= 1536 and mem % 128 == 0, g)
                    self.assertIn(g["kind"], gen.KINDS)
                    self.assertRegex(g["name"], r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
                    if g["kind"] == "hot":
                        self.assertLessEqual(g["hot_mib"], gen.HOT_FILE_MIB)
                        self.assertLessEqual(g["hot_mib"], 0.40 * mem + 1)
                        self.assertGreaterEqual(g["hot_mib"], 0.10 * mem - 1)
                    else:
                        self.assertNotIn("hot_mib", g)
                    if g["kind"] == "stream":
                        self.assertGreater(gen.STREAM_FILE_MIB, mem)
                    if g["kind"] == "anon":
                        self.assertFalse(g.get("spike"))
                        self.assertTrue(0.20 * mem - 8 <= g["alloc_mib"] <= 0.50 * mem + 8, g)
                        self.assertTrue(0.20 * 150 <= g["alloc_at_s"] <= 0.60 * 150, g)
                    elif g.get("spike"):
                        self.assertTrue(0.30 * mem - 8 <= g["alloc_mib"] <= 0.50 * mem + 8
                                        or g["alloc_mib"] == gen.SPIKE_MAX_MIB, g)
                        self.assertLessEqual(g["alloc_mib"], gen.SPIKE_MAX_MIB)
                        self.assertTrue(0.40 * 150 <= g["alloc_at_s"] <= 0.75 * 150, g)
                        # Its hot set and spike fit in the guest with base and reserve.
                        self.assertLessEqual(gen.BASE_MIB + g.get("hot_mib", 0) + g["alloc_mib"]
                                             + gen.kernel_reserve_mib(mem), mem)
                    else:
                        self.assertNotIn("alloc_mib", g)
                self.assertLessEqual(sum(1 for g in m["guests"] if g.get("spike")), 1)
                self.assertEqual(m["total_mib"], sum(g["memory_mib"] for g in m["guests"]))

    def test_budget_feasible_and_tight(self):
        for seed in SEEDS:
            m = gen.generate(seed)
            with self.subTest(seed=seed):
                need = sum(gen.guest_need_mib(g) for g in m["guests"])
                self.assertAlmostEqual(m["need_mib"], need, places=0)
                # Every guest's floor and peak fit in it ...
                self.assertGreaterEqual(m["budget_mib"], need)
                self.assertGreaterEqual(m["budget_mib"], sum(gen.floor_mib(g["memory_mib"])
                                                             for g in m["guests"]))
                # ... and it is at most 85% of what they would hold unconstrained.
                self.assertLessEqual(m["budget_mib"], 0.85 * m["total_mib"])
                self.assertEqual(m["budget_mib"] % 64, 0)

    def test_need_counts_floor_hot_set_allocation_and_reserve(self):
        g = {"memory_mib": 1536, "kind": "hot", "hot_mib": 500, "alloc_mib": 300}
        self.assertAlmostEqual(gen.guest_need_mib(g), gen.BASE_MIB + 800 + 79)
        self.assertEqual(gen.guest_need_mib({"memory_mib": 512, "kind": "idle"}), 256)
        self.assertEqual(gen.guest_need_mib({"memory_mib": 1536, "kind": "stream"}), 384)

    def test_times_scale_with_the_run(self):
        for seed in range(40):
            a, b = gen.generate(seed, 150), gen.generate(seed, 300)
            with self.subTest(seed=seed):
                self.assertEqual([g["memory_mib"] for g in a["guests"]], [g["memory_mib"] for g in b["guests"]])
                for ga, gb in zip(a["guests"], b["guests"]):
                    if "alloc_at_s" in ga:
                        self.assertAlmostEqual(gb["alloc_at_s"], 2 * ga["alloc_at_s"], delta=1)

    def test_some_held_out_seed_spikes(self):
        # The reports' seeds (101-110): at least one of them has a fast allocation spike.
        spiky = [s for s in range(101, 111) if any(g.get("spike") for g in gen.generate(s)["guests"])]
        self.assertTrue(spiky)

    def test_every_kind_and_spikes_appear(self):
        mixes = [gen.generate(s) for s in range(100)]
        kinds = {g["kind"] for m in mixes for g in m["guests"]}
        self.assertEqual(kinds, set(gen.KINDS))
        spiky = sum(any(g.get("spike") for g in m["guests"]) for m in mixes)
        self.assertTrue(30 <= spiky <= 70, spiky)

    def test_parse_seed(self):
        self.assertEqual(gen.parse_seed("gen:101"), 101)
        self.assertIsNone(gen.parse_seed("trio"))
        with self.assertRaises(SystemExit):
            gen.parse_seed("gen:abc")

    def test_describe_names_every_guest_and_the_budget(self):
        m = gen.generate(3)
        line = gen.describe(m)
        for g in m["guests"]:
            self.assertIn(g["name"], line)
        self.assertIn("budget %d MiB" % m["budget_mib"], line)
        with redirect_stdout(io.StringIO()) as out:
            self.assertEqual(gen.main(["3"]), 0)
        self.assertEqual(out.getvalue().strip(), line)


if __name__ == "__main__":
    unittest.main()
