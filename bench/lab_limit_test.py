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


def beats(points, max_mib):
    """Heartbeats whose M - MemFree - Cached is `needed` MiB at each (uptime, needed)."""
    return [{"uptime": up, "memfree_kb": (max_mib - needed) * 1024 // 2,
             "cached_kb": (max_mib - needed) * 1024 // 2} for up, needed in points]


def run(policy, rep, per_guest, maxes, seconds=100, hb=None):
    return {"policy": policy, "mix": "m", "agent": True, "rep": rep, "seconds": seconds,
            "guest_max_mib": maxes,
            "reclaimed_gib_s": sum(per_guest.values()),
            "guests": {g: {"reclaimed_gib_s": per_guest[g], "heartbeats": (hb or {}).get(g, [])}
                       for g in maxes}}


class BoundTest(unittest.TestCase):
    def test_cases(self):
        # (what, max MiB, needed points, protected MiB, reserve MiB, seconds, expected GiB*s)
        cases = [
            ("cache only: held at the default floor (256 MiB)", 1024, [(10, 100)], None, 0, 100,
             768 * 100 * GIB_S_PER_MIB_S),
            ("the floor is 25% of a large guest", 2048, [(0, 100)], None, 0, 100,
             1536 * 100 * GIB_S_PER_MIB_S),
            ("a hot guest above the size it collapses at", 1024, [(0, 100)], 300, 0, 100,
             724 * 100 * GIB_S_PER_MIB_S),
            ("an allocation at t=50 raises the bound from then on", 1024,
             [(0, 100), (50, 600)], None, 0, 100,
             (768 * 50 + 424 * 50) * GIB_S_PER_MIB_S),
            ("the reserve adds to what is needed, not to the floor", 1024,
             [(0, 100), (50, 600)], None, 64, 100,
             (768 * 50 + 360 * 50) * GIB_S_PER_MIB_S),
            ("no heartbeats: the floor alone", 1024, [], None, 0, 10,
             768 * 10 * GIB_S_PER_MIB_S),
        ]
        for what, mx, points, protected, reserve, seconds, want in cases:
            with self.subTest(what):
                series = lab_limit.needed_series(beats(points, mx), mx)
                got, _ = lab_limit.bound_gib_s(mx, series, protected, seconds, reserve)
                self.assertAlmostEqual(got, want, places=6)

    def test_needed_is_time_from_the_first_heartbeat(self):
        series = lab_limit.needed_series(beats([(5, 100), (7, 200)], 1024), 1024)
        self.assertEqual(series, [(0, 100), (2, 200)])
        self.assertEqual(lab_limit.at(series, 1.9), 100)
        self.assertEqual(lab_limit.at(series, 2), 200)


class AnalyseTest(unittest.TestCase):
    def test_target_share_and_policy_medians(self):
        maxes = {"a": 1024, "b": 1024}
        hb = {"a": beats([(0, 100)], 1024), "b": beats([(0, 100)], 1024)}
        runs = []
        for rep, (mom_a, law_a) in enumerate([(10, 40), (20, 50), (30, 60)]):
            runs.append(run("static", rep, {"a": 0, "b": 0}, maxes, hb=hb))
            runs.append(run("mom", rep, {"a": mom_a, "b": 0}, maxes))
            runs.append(run("law", rep, {"a": law_a, "b": 5}, maxes))
        out = io.StringIO()
        summary = lab_limit.analyse(runs, {"b": 512}, out)
        self.assertEqual(len(summary), 1)
        s = summary[0]
        bound = (768 + 512) * 100 / 1024
        self.assertAlmostEqual(s["bound_gib_s"], bound)
        self.assertEqual(s["mom_gib_s"], 20)
        self.assertEqual(s["policies"]["law"], 55)
        self.assertAlmostEqual(s["target_share_of_bound"], 30 / bound)
        self.assertIn("1.5x MoM = 30.0 GiB*s", out.getvalue())

    def test_protect_records_the_guests_it_names(self):
        maxes = {"a": 1024}
        runs = [run("static", 0, {"a": 0}, maxes, hb={"a": beats([(0, 1)], 1024)})]
        used = set()
        lab_limit.analyse(runs, {"a": 300, "z": 300}, io.StringIO(), used=used)
        self.assertEqual(used, {"a"})

    def test_main_refuses_a_protected_guest_of_no_mix(self):
        maxes = {"a": 1024}
        runs = [run("static", 0, {"a": 0}, maxes, hb={"a": beats([(0, 1)], 1024)})]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(runs, f)
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
