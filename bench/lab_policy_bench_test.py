"""Table tests of bench/lab_policy_bench.py's arithmetic on made-up runs: no guest, no time."""

import argparse
import contextlib
import io
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lab_policy_bench as bench  # noqa: E402


def run(policy, budget, guests, hot=None, rep=0):
    """A run as the bench records it: guests {name: (stall s, refaults, alloc seconds or None)}."""
    return {"policy": policy, "mix": "gen:1", "agent": True, "rep": rep, "budget_mib": budget,
            "guest_max_mib": {n: 1024 for n in guests},
            "hot_mbps_by_guest": hot or {},
            "guests": {n: dict({"psi_stall_s": s, "refaults": f, "oom_kill": 0},
                               **({"alloc": {"seconds": a}} if a is not None else {}))
                       for n, (s, f, a) in guests.items()}}


class AllocationTest(unittest.TestCase):
    def test_cases(self):
        cases = [
            ("none", [{"mode": "hot", "t": 5.0, "mbps": 3000.0}], None),
            ("made", [{"mode": "anon", "allocating_mib": 400, "t": 30.0},
                      {"mode": "anon", "allocated_mib": 400, "t": 32.5}],
             {"mib": 400, "start_t": 30.0, "done_t": 32.5, "seconds": 2.5}),
            ("still under way at the end of the run", [{"mode": "anon", "allocating_mib": 400, "t": 30.0}],
             {"mib": 400, "start_t": 30.0, "done_t": None, "seconds": None}),
        ]
        for what, lines, want in cases:
            with self.subTest(what):
                self.assertEqual(bench.allocation(lines), want)


class VsUnconstrainedTest(unittest.TestCase):
    def test_each_guest_against_itself(self):
        base = run("static", None, {"a": (1.0, 100, None), "h": (0.5, 10, None)}, hot={"h": 2000.0})
        r = run("law", 2048, {"a": (4.0, 160, 2.5), "h": (0.5, 5000, None)}, hot={"h": 1500.0})
        v = bench.vs_unconstrained(r, base)
        self.assertEqual(v["a"]["psi_stall_s"], [4.0, 1.0, 3.0])
        self.assertEqual(v["a"]["refaults"], [160, 100, 60])
        self.assertNotIn("mbps_change_pct", v["a"])
        self.assertEqual(v["h"]["refaults"], [5000, 10, 4990])
        self.assertAlmostEqual(v["h"]["mbps_change_pct"], -25.0)
        self.assertEqual(bench.vs_unconstrained(r, None), {})

    def test_harm_table_has_a_row_per_guest_and_policy(self):
        base = run("static", None, {"a": (1.0, 100, None)})
        r = run("law", 2048, {"a": (4.0, 160, 2.5)})
        r["vs_unconstrained"] = bench.vs_unconstrained(r, base)
        base["vs_unconstrained"] = bench.vs_unconstrained(base, base)
        with contextlib.redirect_stdout(io.StringIO()) as out:
            bench.print_harm([base, r], 1)
        rows = [l for l in out.getvalue().splitlines() if l.startswith("| a |")]
        self.assertEqual(rows, ["| a | law | 4.0 (1.0) | +3.0 | 160 (100) | +60 | - | 2.5 (-) | 0 |"])
        base["guests"]["a"]["alloc"] = {"seconds": 1.5}
        with contextlib.redirect_stdout(io.StringIO()) as out:
            bench.print_harm([base, r], 1)
        self.assertIn("| +60 | - | 2.5 (1.5) | 0 |", out.getvalue())


class TableTest(unittest.TestCase):
    def test_header_and_rows_have_as_many_cells_without_a_hot_guest(self):
        base = run("static", None, {"a": (1.0, 100, None)})
        r = run("law", 2048, {"a": (4.0, 160, 2.5)})
        for x in (base, r):
            x.update(reclaimed_gib_s=1.0, reclaimed_end_mib=0, fits_budget_after_s=None)
            x["guests"]["a"]["balloon_deflate_pages"] = 0
        for hot in ({}, {"a": 100.0}):
            with self.subTest(hot=bool(hot)):
                base["hot_mbps_by_guest"] = dict(hot)
                r["hot_mbps_by_guest"] = dict(hot)
                with contextlib.redirect_stdout(io.StringIO()) as out:
                    bench.print_table([base, r], 1)
                rows = [l for l in out.getvalue().splitlines() if l.startswith("|")]
                self.assertEqual(len({l.count("|") for l in rows}), 1, rows)


class PolicyLabelTest(unittest.TestCase):
    def test_parse(self):
        cases = [
            ("pagecache", ("pagecache", False)),
            ("mom", ("mom", False)),
            ("pagecache:profile_ratio=1.5", ("pagecache:profile_ratio=1.5", False)),
            ("pagecache+reclaim", ("pagecache", True)),
            ("pagecache:burst_window_s=0+reclaim", ("pagecache:burst_window_s=0", True)),
        ]
        for label, want in cases:
            with self.subTest(label):
                self.assertEqual(bench.parse_policy_label(label), want)
        for label in ("mom+reclaim", "proxmox+reclaim", "+reclaim", "pagecache_law+reclaim"):
            with self.subTest(label):
                with self.assertRaisesRegex(ValueError, "pagecache only"):
                    bench.parse_policy_label(label)

    def test_reclaim_needs_the_agent_in_every_run(self):
        cases = [
            (["mom", "pagecache", "pagecache+reclaim"], [True], None),
            (["mom", "pagecache"], [False], None),
            (["mom", "pagecache+reclaim"], [False], "needs --agent=on"),
            (["pagecache+reclaim"], [True, False], "needs --agent=on.*--agent=both"),
            (["mom+reclaim"], [True], "pagecache only"),
        ]
        for labels, modes, want in cases:
            with self.subTest(labels=labels, modes=modes):
                got = bench.check_policy_labels(labels, modes)
                if want is None:
                    self.assertIsNone(got)
                else:
                    self.assertRegex(got, want)

    def test_main_refuses_before_any_lab(self):
        for agent in (["--agent=off"], ["--no-agent"], ["--agent=both"]):
            with self.subTest(agent=agent):
                argv = ["lab_policy_bench.py", "--policies=mom,pagecache+reclaim"] + agent
                # skip_reason is the first look at the machine: the error comes before it.
                with mock.patch.object(sys, "argv", argv), \
                        mock.patch.object(bench.harness, "skip_reason", side_effect=AssertionError("looked")), \
                        mock.patch.object(bench, "run_policy", side_effect=AssertionError("ran")):
                    with self.assertRaises(SystemExit) as e:
                        bench.main()
                self.assertIn("'pagecache+reclaim' needs --agent=on", str(e.exception.code))


class LabSpecTest(unittest.TestCase):
    def test_generated_mix(self):
        args = argparse.Namespace(seconds=150, stream_mib=700, anon_mib=300, anon_after=60)
        guests, stream, hot_file, desc = bench.lab_spec("gen:1", args)
        self.assertEqual(desc, bench.lab_mix_gen.generate(1, 150))
        self.assertEqual((stream, hot_file), (bench.lab_mix_gen.STREAM_FILE_MIB,
                                              bench.lab_mix_gen.HOT_FILE_MIB))
        self.assertEqual([g[0] for g in guests], [g["name"] for g in desc["guests"]])
        for (name, kw, maxb), g in zip(guests, desc["guests"]):
            self.assertEqual(maxb, g["memory_mib"] << 20)
            self.assertEqual(kw["workload"], "idle" if g["kind"] == "anon" else g["kind"])
            self.assertEqual(kw.get("alloc"), (g["alloc_mib"], g["alloc_at_s"]) if g.get("alloc_mib") else None)
            self.assertEqual(kw.get("hot_mib"), g.get("hot_mib"))

    def test_named_mix_unchanged(self):
        args = argparse.Namespace(seconds=150, stream_mib=1536, anon_mib=300, anon_after=60)
        guests, stream, hot_file, desc = bench.lab_spec("trio", args)
        self.assertIsNone(desc)
        self.assertEqual((stream, hot_file), (1536, 128))
        self.assertEqual(guests, bench.mix_guests("trio", args))


if __name__ == "__main__":
    unittest.main()
