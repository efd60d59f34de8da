"""Table tests of bench/lab_limit.py's bound, on runs made up to the JSON's shape."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_limit  # noqa: E402

GIB_S_PER_MIB_S = 1.0 / 1024
MIB = 1 << 20


def beats(points, max_mib):
    """Heartbeats whose M - MemFree - Cached is `needed` MiB at each (uptime, needed)."""
    return [{"uptime": up, "memfree_kb": (max_mib - needed) * 1024 // 2,
             "cached_kb": (max_mib - needed) * 1024 // 2} for up, needed in points]


def run(policy, rep, sizes, maxes, times, hb=None):
    """A run shaped as bench/lab_policy_bench.py writes it: `sizes` {guest: f(t) -> MiB}, sampled
    at `times`, each sample counting 2 s as the bench counts it."""
    samples = [dict({"t": t}, **{g: sizes[g](t) * MIB for g in maxes}) for t in times]
    per = {g: sum((maxes[g] - row[g] / MIB) * 2.0 for row in samples) / 1024 for g in maxes}
    return {"policy": policy, "mix": "m", "agent": True, "rep": rep, "seconds": 150,
            "guest_max_mib": maxes, "samples": samples, "reclaimed_gib_s": sum(per.values()),
            "guests": {g: {"reclaimed_gib_s": per[g], "heartbeats": (hb or {}).get(g, [])}
                       for g in maxes}}


class BoundTest(unittest.TestCase):
    def test_cases(self):
        times = [0, 2.1, 4.2, 50.4, 52.5]  # five samples, 2 s each: 10 s
        # (what, max MiB, needed points, collapse MiB, reserve MiB, floor, expected GiB*s)
        cases = [
            ("cache only: held at the default floor (256 MiB)", 1024, [(10, 100)], None, 0, True,
             768 * 10 * GIB_S_PER_MIB_S),
            ("no floor: held at what it needs", 1024, [(0, 100)], None, 0, False,
             924 * 10 * GIB_S_PER_MIB_S),
            ("the floor is 25% of a large guest", 2048, [(0, 100)], None, 0, True,
             1536 * 10 * GIB_S_PER_MIB_S),
            ("a hot guest above the size it collapses at", 1024, [(0, 100)], 300, 0, True,
             724 * 10 * GIB_S_PER_MIB_S),
            ("an allocation at t=50 raises the bound from then on", 1024,
             [(0, 100), (50, 600)], None, 0, True,
             (768 * 6 + 424 * 4) * GIB_S_PER_MIB_S),
            ("the reserve adds to what is needed, not to the floor", 1024,
             [(0, 100), (50, 600)], None, 64, True,
             (768 * 6 + 360 * 4) * GIB_S_PER_MIB_S),
            ("no heartbeats: the floor alone", 1024, [], None, 0, True,
             768 * 10 * GIB_S_PER_MIB_S),
        ]
        for what, mx, points, collapse, reserve, floor, want in cases:
            with self.subTest(what):
                series = lab_limit.needed_series(beats(points, mx), mx)
                got = lab_limit.bound_gib_s(mx, series, collapse, times, reserve, floor)
                self.assertAlmostEqual(got, want, places=6)

    def test_needed_is_time_from_the_first_heartbeat(self):
        series = lab_limit.needed_series(beats([(5, 100), (7, 200)], 1024), 1024)
        self.assertEqual(series, [(0, 100), (2, 200)])
        self.assertEqual(lab_limit.at(series, 1.9), 100)
        self.assertEqual(lab_limit.at(series, 2), 200)


class ReactiveCeilingTest(unittest.TestCase):
    """The reactive ceiling on small synthetic series: needed(t) from heartbeats 2 s apart."""

    def test_cases(self):
        times = [0, 2, 4, 6, 8, 10, 12]  # seven samples, 2 s each
        # (what, max MiB, needed points, collapse, period s, reserve MiB, floor, expected sizes)
        cases = [
            ("flat demand: needed + reserve, like the bound with that reserve", 1024,
             [(0, 400)], None, 2, 50, True, [450] * 7),
            ("below the floor: the floor", 1024, [(0, 100)], None, 2, 50, True, [256] * 7),
            ("no floor: needed + reserve", 1024, [(0, 100)], None, 2, 50, False, [150] * 7),
            ("a rise is held from the moment it is made (not a period late)", 1024,
             [(0, 300), (6, 700)], None, 2, 0, True, [300, 300, 300, 700, 700, 700, 700]),
            ("a fall is taken one period late", 1024,
             [(0, 700), (6, 300)], None, 2, 0, True, [700, 700, 700, 700, 300, 300, 300]),
            ("a fall with a 5 s period: taken at the first sample 5 s after it", 1024,
             [(0, 700), (2, 300)], None, 5, 0, True, [700, 700, 700, 700, 300, 300, 300]),
            ("a hot guest: never below its collapse", 1024, [(0, 100)], 300, 2, 50, True, [300] * 7),
            ("never above the guest's memory", 1024, [(0, 1000)], None, 2, 79, True, [1024] * 7),
            ("no heartbeats: the floor alone", 1024, [], None, 2, 50, True, [256] * 7),
        ]
        for what, mx, points, collapse, period, reserve, floor, sizes in cases:
            with self.subTest(what):
                series = lab_limit.needed_series(beats(points, mx), mx)
                got = [lab_limit.reactive_mib(mx, series, collapse, t, period, reserve, floor)
                       for t in times]
                self.assertEqual(got, sizes)
                self.assertAlmostEqual(
                    lab_limit.reactive_gib_s(mx, series, collapse, times, period, reserve, floor),
                    sum(mx - v for v in sizes) * 2.0 * GIB_S_PER_MIB_S, places=6)

    def test_burst_room_keeps_the_largest_rise_within_its_window(self):
        times = [0, 2, 4, 6, 8, 10, 12]
        # 300 MiB, then +400 at 4 s (one period's rise), back down at 8 s (taken a period late).
        series = lab_limit.needed_series(beats([(0, 300), (4, 700), (8, 300)], 1024), 1024)
        # (window s, expected sizes): the rise is kept from when it is made until it leaves the window.
        cases = [
            (0, [300, 300, 700, 700, 700, 300, 300]),       # off: the plain reactive ceiling
            (600, [300, 300, 1024, 1024, 1024, 700, 700]),  # 700 + 400 capped at M, then 300 + 400
            (5, [300, 300, 1024, 1024, 1024, 300, 300]),    # the rise at 4 s leaves the window at 9 s
        ]
        for window, sizes in cases:
            with self.subTest(window=window):
                got = [lab_limit.reactive_mib(1024, series, None, t, 2, 0, True, window) for t in times]
                self.assertEqual(got, sizes)
        self.assertEqual(lab_limit.burst_room_mib(series, 12, 2, 600), 400)
        # A fall is no burst.
        falling = lab_limit.needed_series(beats([(0, 700), (4, 300)], 1024), 1024)
        self.assertEqual(lab_limit.burst_room_mib(falling, 12, 2, 600), 0)

    def test_never_above_the_bound_with_the_same_reserve(self):
        times = [2.1 * i for i in range(40)]
        points = [(0, 150), (10, 650), (30, 200), (31, 600), (50, 120), (70, 900)]
        series = lab_limit.needed_series(beats(points, 1024), 1024)
        for reserve in (0, 58):
            for period in (0.5, 2, 5, 20):
                with self.subTest(reserve=reserve, period=period):
                    c = lab_limit.reactive_gib_s(1024, series, None, times, period, reserve)
                    b = lab_limit.bound_gib_s(1024, series, None, times, reserve)
                    self.assertLessEqual(c, b + 1e-9)
        # A zero period and no reserve: the ceiling is the bound.
        self.assertAlmostEqual(lab_limit.reactive_gib_s(1024, series, None, times, 0, 0),
                               lab_limit.bound_gib_s(1024, series, None, times, 0))

    def test_kernel_reserve_by_size_goes_through_the_measured_points(self):
        self.assertAlmostEqual(lab_limit.kernel_reserve_mib(768), 58)
        self.assertAlmostEqual(lab_limit.kernel_reserve_mib(1536), 79)
        self.assertTrue(50 < lab_limit.kernel_reserve_mib(512) < 58)


class AnalyseTest(unittest.TestCase):
    MAXES = {"a": 1024, "b": 1024}
    HB = {"a": beats([(0, 100), (60, 600)], 1024), "b": beats([(0, 100)], 1024)}

    def runs(self, law_a, law_times, law_b=lambda t: 1024):
        """Per repetition: static, MoM at 900 MiB, and the law with its guests at law_a(t), law_b(t)."""
        std = [2.1 * i for i in range(70)]
        out = []
        for rep in range(3):
            out.append(run("static", rep, {"a": lambda t: 1024, "b": lambda t: 1024}, self.MAXES, std,
                           hb=self.HB))
            out.append(run("mom", rep, {"a": lambda t: 900, "b": lambda t: 900}, self.MAXES, std))
            out.append(run("law", rep, {"a": law_a, "b": law_b}, self.MAXES, law_times))
        return out

    def test_a_run_at_the_bound_scores_one_whatever_its_sampling(self):
        # The bench counts each sample 2 s; its loop takes longer, so a 150 s run has fewer than
        # 75 samples. A run held at the bound is 1.0 of it however many samples it took.
        a_at_bound = lambda t: 256 if t < 60 else 600  # noqa: E731
        for times in ([2.0 * i for i in range(75)], [2.2 * i for i in range(68)]):
            with self.subTest(samples=len(times)):
                runs = self.runs(a_at_bound, times, law_b=lambda t: 256)
                summary = lab_limit.analyse(runs, {}, io.StringIO())
                self.assertAlmostEqual(summary[0]["policies"]["law"]["share_of_bound"], 1.0)
                runs = self.runs(lambda t: a_at_bound(t) + 64, times, law_b=lambda t: 256)
                summary = lab_limit.analyse(runs, {}, io.StringIO())
                self.assertLess(summary[0]["policies"]["law"]["share_of_bound"], 0.97)

    def test_target_share_is_on_moms_own_samples(self):
        summary = lab_limit.analyse(self.runs(lambda t: 1024, [0.0]), {"b": 512}, io.StringIO())
        s = summary[0]
        std = [2.1 * i for i in range(70)]
        bound = sum((768 if t < 60 else 424) + 512 for t in std) * 2.0 / 1024
        mom = 2 * 124 * 70 * 2.0 / 1024
        self.assertAlmostEqual(s["mom_gib_s"], mom)
        self.assertAlmostEqual(s["bound_gib_s"], bound)
        self.assertAlmostEqual(s["target_share_of_bound"], 1.5 * mom / bound)

    def test_a_run_at_the_reactive_ceiling_scores_one_of_it(self):
        # Guest a's allocation (100 -> 600 MiB at t=60) is a rise: the ceiling holds it from then
        # on, at needed + the kernel reserve (by size: 1024 MiB -> 65 MiB); b stays at its floor.
        res = lab_limit.kernel_reserve_mib(1024)
        a_at_ceiling = lambda t: 256 if t < 60 else 600 + res  # noqa: E731
        runs = self.runs(a_at_ceiling, [2.0 * i for i in range(75)], law_b=lambda t: 256)
        s = lab_limit.analyse(runs, {}, io.StringIO())[0]
        self.assertAlmostEqual(s["policies"]["law"]["share_of_ceiling"], 1.0)
        self.assertLess(s["policies"]["law"]["share_of_bound"], 1.0)
        self.assertLess(s["ceiling_gib_s"], s["bound_gib_s"])
        # One reserve for every guest, given: 0 makes the ceiling the bound (no fall in demand).
        s = lab_limit.analyse(runs, {}, io.StringIO(), reactive_reserve_mib=0)[0]
        self.assertAlmostEqual(s["ceiling_gib_s"], s["bound_gib_s"])

    def test_rss_ceiling_counts_only_memory_in_use_above_the_reactive_size(self):
        # A 1 GiB guest needing 100 MiB with 800 MiB of cache (used 900): the reactive size is
        # the 256 MiB floor, so 644 MiB of its RSS could go back, 2 s a sample. Free memory
        # (the other 124 MiB) counts nothing: reporting returns it under every policy.
        hb = [{"uptime": 10.0 + t, "memfree_kb": 124 * 1024, "cached_kb": 800 * 1024} for t in range(0, 20, 2)]
        needed = lab_limit.needed_series(hb, 1024)
        used = lab_limit.used_series(hb, 1024)
        times = [2.0 * i for i in range(10)]
        self.assertAlmostEqual(lab_limit.reactive_rss_gib_s(1024, needed, used, None, times, 2.0, 65),
                               644 * 2 * 10 / 1024)
        # A hot guest protected above what it uses: nothing.
        self.assertEqual(lab_limit.reactive_rss_gib_s(1024, needed, used, 950, times, 2.0, 65), 0.0)
        # A guest with no heartbeats: nothing to count.
        self.assertEqual(lab_limit.reactive_rss_gib_s(1024, [], [], None, times, 2.0, 65), 0.0)

    def test_a_generated_mix_protects_its_hot_guests(self):
        runs = self.runs(lambda t: 1024, [0.0])
        for r in runs:
            r["mix_desc"] = {"guests": [{"name": "a", "kind": "hot", "hot_mib": 200},
                                        {"name": "b", "kind": "idle"}]}
        out = io.StringIO()
        s = lab_limit.analyse(runs, {}, out)[0]
        std = [2.1 * i for i in range(70)]
        # a >= 200 + 140 = 340 MiB throughout (its allocation to 600 MiB at 60 s above that);
        # b at its floor.
        want = sum((1024 - (340 if t < 60 else 600)) + 768 for t in std) * 2.0 / 1024
        self.assertAlmostEqual(s["bound_gib_s"], want)
        self.assertIn("a >= 340 MiB (estimated)", out.getvalue())
        # --protect wins over the estimate.
        s = lab_limit.analyse(runs, {"a": 500}, io.StringIO())[0]
        want = sum((1024 - (500 if t < 60 else 600)) + 768 for t in std) * 2.0 / 1024
        self.assertAlmostEqual(s["bound_gib_s"], want)

    def test_protect_records_the_guests_it_names(self):
        used = set()
        lab_limit.analyse(self.runs(lambda t: 1024, [0.0]), {"a": 300, "z": 300}, io.StringIO(),
                          used=used)
        self.assertEqual(used, {"a"})

    def test_main_refuses_a_protected_guest_of_no_mix(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(self.runs(lambda t: 1024, [0.0]), f)
        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                self.assertEqual(lab_limit.main(["--protect=a=300", f.name]), 0)
                self.assertEqual(lab_limit.main(["--protect=z=300", f.name]), 2)
        finally:
            os.unlink(f.name)
        self.assertIn("z, a guest of no mix", err.getvalue())

    def test_parse_protect_names_the_bad_item(self):
        self.assertEqual(lab_limit.parse_protect(["hot=268"]), {"hot": 268.0})
        with self.assertRaises(SystemExit) as e:
            lab_limit.parse_protect(["hot:268"])
        self.assertIn("hot:268", str(e.exception))
        with self.assertRaises(SystemExit) as e:
            lab_limit.parse_protect(["hot=lots"])
        self.assertIn("lots", str(e.exception))


if __name__ == "__main__":
    unittest.main()
