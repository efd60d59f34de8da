"""Table tests of bench/corpus_compare.py on corpus JSON made up to sim/corpus_report.h's shape."""

import contextlib
import gzip
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_compare  # noqa: E402


def measures(i, policy):
    """One policy's measures on case i (1..10): the harms rise with i, the share falls."""
    share = 1.0 if policy == "limit" else 1.0 - i / 20.0
    return {"reclaimed_gib_s": 100.0 * share, "stall_s": float(i), "refault_gib": 0.0,
            "oom_kills": i, "traffic_gib": 1.0, "reversals_per_guest_hour": float(i),
            "fit_s": 0, "oracle_share": share, "reversals_any_per_guest_hour": 2.0 * i,
            "safe_reclaimed_gib_s": 100.0 * share, "safe_reclaim_share": share,
            "policy_kills": i - 1, "budget_kills": 1, "over_budget_s": 10.0 * i,
            "budget_over_budget_s": 5.0, "excess_stall_s": 0.0 if policy == "limit" else float(i),
            "traffic_per_safe_gib_s": 0.01 * i,
            "host_returned_gib_s": 200.0 * share, "host_returned_share": 2.0 * share,
            "safe_returned_gib_s": 100.0 * share, "safe_returned_share": share,
            "over_budget_rss_s": 5.0 * i,
            "kill_causes": {"budget": 1, "held_low": i - 1} if i > 1 else {"budget": 1}}


def run(seed, policies=("p", "limit", "oracle", "mom")):
    return {"seed": seed, "count": 10, "scenarios": [
        {"name": "seed%d_%03d" % (seed, i), "cache_heavy": i % 2 == 0, "agent": i <= 5,
         "duration_s": 600, "infeasible_s": 60 if i == 10 else 0,
         "results": {p: measures(i, p) for p in policies}} for i in range(1, 11)]}


class PercentileTest(unittest.TestCase):
    def test_linear_like_numpy(self):
        self.assertAlmostEqual(corpus_compare.percentile([4, 1, 3, 2], 50), 2.5)
        self.assertAlmostEqual(corpus_compare.percentile(list(range(1, 11)), 90), 9.1)
        self.assertAlmostEqual(corpus_compare.percentile(list(range(1, 11)), 10), 1.9)
        self.assertAlmostEqual(corpus_compare.percentile([7, None], 90), 7)


class InstrumentsTest(unittest.TestCase):
    def test_worst_decile_is_in_the_bad_direction(self):
        row = corpus_compare.instrument_row(run(101)["scenarios"], "p")
        # share 0.95 .. 0.5: the worst decile is the 10th percentile
        self.assertAlmostEqual(row["safe_reclaim_share"][0], 0.725)
        self.assertAlmostEqual(row["safe_reclaim_share"][1], 1.0 - 9.1 / 20.0)
        # kills 0 .. 9: the worst decile is the 90th
        self.assertAlmostEqual(row["policy_kills"][0], 4.5)
        self.assertAlmostEqual(row["policy_kills"][1], 8.1)
        self.assertAlmostEqual(row["excess_stall_s"][1], 9.1)
        self.assertEqual(row["budget_kills"], 10)
        self.assertEqual(row["budget_over_budget_s"], 50)
        self.assertEqual(row["kill_causes"], {"budget": 10, "held_low": 45})
        self.assertEqual(row["policy_kills_sum"], 45)

    def test_report_per_seed_and_across_seeds(self):
        with tempfile.TemporaryDirectory() as d:
            paths = [os.path.join(d, "s101.json"), os.path.join(d, "s102.json.gz")]
            with open(paths[0], "w") as f:
                json.dump(run(101), f)
            with gzip.open(paths[1], "wt") as f:  # read as gzip
                json.dump(run(102), f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                corpus_compare.main(["--instruments", "--policies=p,limit", "--markdown"] + paths)
            text = out.getvalue()
        self.assertIn("seed 101: 10 cases, 1 with infeasible time (1.0% of all time)", text)
        self.assertIn("safe 0.725 / 0.545", text)
        self.assertIn("traffic 56.32 / 93.18", text)  # MiB per safe GiB*s: 0.055 and 0.091 x 1024
        self.assertIn("kills: policy 45, budget 10 | budget over 50 s | kill causes: budget=10 held_low=45", text)
        self.assertIn("across 2 seed(s)", text)
        self.assertIn("| p | 0.725 [0.725-0.725] |", text)
        self.assertIn("| limit | 1.000 [1.000-1.000] |", text)
        self.assertIn("| 90 | 20 | budget=20 held_low=90 |", text)
        # Less is worse: the worst decile is the 10th percentile, as the safe share's.
        self.assertIn("returned 1.450 / 1.090", text)
        self.assertIn("safe ret 0.725 / 0.545", text)
        self.assertIn("over rss s 27.5 / 45.5", text)

    def test_files_from_before_host_returned(self):
        old = run(1)
        for c in old["scenarios"]:
            for m in c["results"].values():
                for key in ("host_returned_gib_s", "host_returned_share", "safe_returned_gib_s",
                            "safe_returned_share", "over_budget_rss_s"):
                    del m[key]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.json")
            with open(path, "w") as f:
                json.dump(old, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                corpus_compare.main(["--instruments", "--policies=p", path])
            text = out.getvalue()
        self.assertIn("safe 0.725 / 0.545", text)
        self.assertIn("returned - / -", text)
        self.assertIn("over rss s - / -", text)

    def test_the_old_interface_still_works(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.json")
            with open(path, "w") as f:
                json.dump(run(1), f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                corpus_compare.main(["--policy=p", "--against=limit", path])
            text = out.getvalue()
        self.assertIn("seed 1  all        10 cases  reclaim 0.725x", text)
        self.assertIn("seed 1  agent", text)
        self.assertIn("seed 1  no agent", text)
        self.assertNotIn("across", text)

    def test_agent_filter(self):
        r = run(1)
        for i, c in enumerate(r["scenarios"], start=1):  # 1-5 all agent, 6-7 mixed, 8-10 none
            c["agent_guests"] = 3 if i <= 5 else (1 if i <= 7 else 0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.json")
            with open(path, "w") as f:
                json.dump(r, f)
            for which, cases, share in (("on", 5, "0.850"), ("mixed", 2, "0.675"), ("off", 3, "0.550")):
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    corpus_compare.main(["--instruments", "--agent=" + which, "--policies=p", path])
                text = out.getvalue()
                self.assertIn("seed 1: %d cases" % cases, text, which)
                self.assertIn("safe %s /" % share, text, which)
            # Files from before agent_guests tell only "on".
            for c in r["scenarios"]:
                del c["agent_guests"]
            with open(path, "w") as f:
                json.dump(r, f)
            with self.assertRaises(SystemExit) as e:
                corpus_compare.main(["--instruments", "--agent=off", path])
            self.assertIn("no agent_guests", str(e.exception))

    def test_old_files_without_instruments_are_refused(self):
        old = run(1)
        for c in old["scenarios"]:
            for m in c["results"].values():
                del m["safe_reclaim_share"]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.json")
            with open(path, "w") as f:
                json.dump(old, f)
            with self.assertRaises(SystemExit) as e:
                corpus_compare.main(["--instruments", path])
        self.assertIn("no instruments", str(e.exception))


if __name__ == "__main__":
    unittest.main()
