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

    def test_rss_and_agent_reclaim_columns(self):
        base = run("static", None, {"a": (1.0, 100, None)})
        r = run("pagecache+reclaim", 2048, {"a": (1.0, 100, None)})
        old = run("mom", 2048, {"a": (1.0, 100, None)})  # JSON written before RSS and agent figures
        for x in (base, r, old):
            x.update(reclaimed_gib_s=1.0, reclaimed_end_mib=0, fits_budget_after_s=None)
            x["guests"]["a"].update(balloon_inflate_pages=7, balloon_deflate_pages=3)
        r["host_returned_rss"] = {"gib_s": 12.34, "by_guest": {"a": 12.34}, "aligned": 70, "median": 2,
                                  "missing": 1}
        r["guests"]["a"]["agent_reclaim"] = {"claimed_bytes": 300 << 20, "confirmed_bytes": 200 << 20}
        with contextlib.redirect_stdout(io.StringIO()) as out:
            bench.print_table([base, r, old], 1)
        lines = out.getvalue().splitlines()
        header = next(l for l in lines if l.startswith("| policy |")).split(" | ")
        row = lambda p: dict(zip(header, next(l for l in lines if l.startswith("| %s |" % p)).split(" | ")))
        self.assertEqual(row("pagecache+reclaim")["host returned GiB*s (RSS)"], "12.3")
        self.assertEqual(row("pagecache+reclaim")["agent reclaimed MiB (confirmed)"], "300 (200)")
        self.assertEqual(row("pagecache+reclaim")["balloon inflate / deflate pages"], "7 / 3")
        self.assertEqual(row("mom")["host returned GiB*s (RSS)"], "-")
        self.assertEqual(row("mom")["agent reclaimed MiB (confirmed)"], "-")
        self.assertEqual(row("static (no budget)")["host returned GiB*s (RSS)"], "-")
        self.assertIn("same second (nearest sample within 1.5 s) for 70 guest samples, at that run's median for 2 "
                      "(none near); 1 counted nothing", out.getvalue())


def rss(*rows):
    """rss_samples from (t, {guest: MiB or None}) rows."""
    return [dict({"t": t}, **{n: None if v is None else v << 20 for n, v in g.items()}) for t, g in rows]


class HostReturnedRssTest(unittest.TestCase):
    BASE = rss((0.0, {"a": 1000, "b": 500}), (2.1, {"a": 1000, "b": 500}), (4.2, {"a": 900, "b": None}),
               (6.3, {"a": 1000, "b": 500}))  # medians: a 1000, b 500

    def test_cases(self):
        # (what, run's rss_samples, GiB*s by guest, aligned, median, missing); each sample counts 2 s.
        cases = [
            ("the same as unconstrained: nothing", rss((0.2, {"a": 1000, "b": 500})), {"a": 0, "b": 0}, 2, 0, 0),
            ("below it: the difference", rss((0.2, {"a": 800, "b": 400})), {"a": 400, "b": 200}, 2, 0, 0),
            ("above it: clipped at 0, not netted against the other guest",
             rss((0.2, {"a": 1100, "b": 300})), {"a": 0, "b": 400}, 2, 0, 0),
            ("against the sample nearest in time", rss((3.5, {"a": 700, "b": 500})), {"a": 400, "b": 0}, 1, 1, 0),
            ("no unconstrained sample near that second: its median",
             rss((8.0, {"a": 700, "b": 500}), (20.0, {"a": 1000, "b": 100})), {"a": 600, "b": 800}, 0, 4, 0),
            ("a guest gone from the run counts nothing", rss((0.2, {"a": None, "b": 400})), {"a": 0, "b": 200},
             1, 0, 1),
            ("over time", rss((0.2, {"a": 900, "b": 500}), (2.0, {"a": 800, "b": 500}), (4.4, {"a": 800, "b": 500})),
             {"a": 200 + 400 + 200, "b": 0}, 5, 1, 0),
        ]
        base = {"guest_max_mib": {"a": 1024, "b": 1024}, "rss_samples": self.BASE}
        for what, rows, mib_s, aligned, median, missing in cases:
            with self.subTest(what):
                got = bench.host_returned_rss({"guest_max_mib": {"a": 1024, "b": 1024}, "rss_samples": rows}, base)
                self.assertEqual(set(got["by_guest"]), {"a", "b"})
                for n, v in mib_s.items():
                    self.assertAlmostEqual(got["by_guest"][n], v / 1024.0, msg=n)
                self.assertAlmostEqual(got["gib_s"], sum(mib_s.values()) / 1024.0)
                self.assertEqual((got["aligned"], got["median"], got["missing"]), (aligned, median, missing))

    def test_none_without_a_base_or_rss(self):
        r = {"guest_max_mib": {"a": 1024}, "rss_samples": rss((0.0, {"a": 500}))}
        base = {"guest_max_mib": {"a": 1024}, "rss_samples": rss((0.0, {"a": 1000}))}
        self.assertIsNone(bench.host_returned_rss(r, None))
        self.assertIsNone(bench.host_returned_rss({"guest_max_mib": {"a": 1024}, "samples": []}, base))  # old JSON
        self.assertIsNone(bench.host_returned_rss(r, {"guest_max_mib": {"a": 1024}, "samples": []}))
        self.assertEqual(bench.host_returned_rss(base, base)["gib_s"], 0)

    def test_a_guest_without_rss_in_the_base(self):
        r = {"guest_max_mib": {"a": 1024}, "rss_samples": rss((0.0, {"a": 500}))}
        base = {"guest_max_mib": {"a": 1024}, "rss_samples": rss((0.0, {"a": None}))}
        got = bench.host_returned_rss(r, base)
        self.assertEqual((got["gib_s"], got["aligned"], got["median"], got["missing"]), (0, 0, 0, 1))


class AgentReclaimFiguresTest(unittest.TestCase):
    def test_cases(self):
        cases = [
            ("no agent", {"name": "a"}, {}),
            ("no reclaim", {"agent": {"connected": True}}, {}),
            ("proto JSON: zeros left out, 64-bit as strings",
             {"agent": {"reclaim": {"state": "idle", "claimed_bytes": "314572800", "confirmed_bytes": "209715200",
                                    "unconfirmed_claims": 1}}},
             {"state": "idle", "claimed_requested_bytes": 0, "claimed_bytes": 300 << 20,
              "confirmed_bytes": 200 << 20, "unconfirmed_bytes": 0, "unconfirmed_claims": 1}),
        ]
        for what, guest, want in cases:
            with self.subTest(what):
                self.assertEqual(bench.agent_reclaim_figures(guest), want)


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

    def test_coldcache_readers_run_on_the_hook(self):
        args = argparse.Namespace(seconds=150, stream_mib=700, anon_mib=300, anon_after=60)
        guests = {name: kw for name, kw, _ in bench.lab_spec("coldcache", args)[0]}
        # Both readers idle until the hook reads; only the reader allocates, --anon-after s in.
        self.assertEqual(guests["reader"], dict(workload="idle", memory_mib=1024, readonce=True,
                                                alloc=(300, 60)))
        self.assertEqual(guests["batch"], dict(workload="idle", memory_mib=1024, readonce=True))
        self.assertEqual(guests["hot"], dict(workload="hot", memory_mib=1024, hot_mib=128))


if __name__ == "__main__":
    unittest.main()
