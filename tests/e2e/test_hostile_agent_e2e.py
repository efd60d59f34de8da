#!/usr/bin/python3
"""Hostile agents and agent faults on real QEMU guests (docs/security.md).

One lab for the class, two 512 MiB guests, both running the real plimsoll-agent:
  victim   the guest the attacker would like to hurt; its agent must stay connected and fresh,
           its balloon unmoved, through every case
  hostile  the attacker is root here: it holds this guest's token. Its real agent is first cut
           off the network and then killed (the faults); afterwards the attacker reports as this
           guest from the host with tests/e2e/hostile_agent_client.py (real gRPC over TCP
           loopback, Debian's python3-grpcio)
plimsolld runs under the `static` policy (balloons never move, so an unmoved balloon means
something), agent_stale_after=4s, and with the soft file-descriptor limit systemd gives a
service (1024).

Every attack case asserts: the rejection or bound, the counter in /metrics, that the victim kept
fresh agent data, an unchanged balloon and management, and that GetHostStatus on the control
socket answered within LATENCY_P99_MS (p99 of at least 50 calls made while the attack ran;
printed with the daemon's CPU time).
"""

import contextlib
import json
import os
import re
import resource
import subprocess
import tempfile
import time
import unittest
import uuid

import harness
from harness import MIB, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "hostile_agent_client.py")
# The client needs Debian's python3-grpcio, which lives with the system interpreter.
SYSTEM_PYTHON = "/usr/bin/python3"
GUEST_MIB = 512
STALE_AFTER_S = 4
FLAGS = dict(tick="1s", stats_period_seconds=1, host_reserve_bytes=0, policy="static",
             agent_stale_after="%ds" % STALE_AFTER_S)
# Generous for TCG guests on 2 shared cores; the figures seen are printed.
LATENCY_P99_MS = 250
# AgentServiceOptions and ValidatorOptions defaults (server/agent/agent_service.h,
# report_validator.h): what the bounds below follow from.
MAX_STREAMS = 1024
AUTH_TIMEOUT_S = 10
FRAME_BURST = 20
GUEST_BURST, GUEST_RATE = 10, 2.0
SYSTEMD_SOFT_NOFILE = 1024


def client_problem():
    if not os.path.exists(SYSTEM_PYTHON):
        return "%s is missing" % SYSTEM_PYTHON
    r = subprocess.run([SYSTEM_PYTHON, "-c", "import grpc, grpc.aio, google.protobuf"], capture_output=True)
    if r.returncode != 0:
        return "python3-grpcio and python3-protobuf are not installed (tools/deps.sh installs them)"
    for tool in ("protoc", "/usr/bin/grpc_python_plugin"):
        if not (os.path.exists(tool) or subprocess.run(["which", tool], capture_output=True).returncode == 0):
            return "%s is not installed (protobuf-compiler, protobuf-compiler-grpc)" % tool
    return None


def stop_client(client, until_file):
    """Ends a hostile_agent_client.py case that runs --until-file appears, and prints its summary."""
    with open(until_file, "w"):
        pass
    try:
        out, err = client.communicate(timeout=20)
        print("\n  hostile client: %s %s" % (out.strip(), err.strip()[-300:]))
    except subprocess.TimeoutExpired:
        client.kill()


SKIP = harness.skip_reason() or client_problem()


def metric_samples(text):
    """{(name, ((label, value), ...)): float} of a /metrics text."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not m:
            continue
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


@contextlib.contextmanager
def soft_fd_limit(n):
    """Children started inside inherit a soft RLIMIT_NOFILE of n, as under systemd."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


@unittest.skipIf(SKIP, SKIP)
class HostileAgentE2E(unittest.TestCase):
    figures = []

    @classmethod
    def setUpClass(cls):
        cls.t_class = time.monotonic()
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-hostile-e2e-")
        cls.keys = harness.AgentKeys(cls.workdir)
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"), workload_bin=harness.WORKLOAD)
        cls.lab.start()
        cls.victim_uuid = str(uuid.uuid4())
        cls.hostile_uuid = str(uuid.uuid4())
        cls.stop_file = os.path.join(cls.workdir, "stop-hostile-agent")
        backoff = ("--max_backoff=2s",)
        cls.lab.add_guest("victim", workload="idle", memory_mib=GUEST_MIB,
                          **cls.keys.guest_kwargs(cls.victim_uuid, extra_args=backoff))
        cls.lab.add_guest("hostile", workload="idle", memory_mib=GUEST_MIB,
                          **cls.keys.guest_kwargs(cls.hostile_uuid, stop_file=cls.stop_file, extra_args=backoff))
        for n in ("victim", "hostile"):
            cls.lab.wait_ready(n, timeout=120)
        print("\n  lab: 2 guests ready in %.1fs" % (time.monotonic() - cls.t_class))
        cls.hostile_token = cls.keys.token(cls.hostile_uuid)
        cls.stranger_uuid = str(uuid.uuid4())  # proven by a valid token, but no guest of ours
        cls.stranger_token = cls.keys.token(cls.stranger_uuid)
        with soft_fd_limit(SYSTEMD_SOFT_NOFILE):
            cls.daemon = harness.Daemon(cls.workdir, cls.lab.uri, agent_keys=cls.keys, **FLAGS)
        # Every case compares against the victim's agent record: wait for it here, so a single
        # case can run alone (run_e2e.py -k).
        wait_for("victim agent fresh", lambda: cls.daemon.guests()[0]["victim"].get("agent", {}).get("fresh"),
                 timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        cls.lab.stop()
        print("\n  HostileAgentE2E figures (load average at the end %s):" % loadavg())
        for f in cls.figures:
            print("    " + f)
        print("  HostileAgentE2E: %.0fs in all" % (time.monotonic() - cls.t_class))

    # ---- helpers ---------------------------------------------------------------------------------
    def guest(self, name):
        return self.daemon.guests()[0][name]

    def metrics(self):
        return metric_samples(self.daemon.metrics())

    def value(self, samples, name, **labels):
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def rejected(self, samples, reason):
        return self.value(samples, "plimsoll_agent_reports_rejected_total", reason=reason)

    def ended(self, samples, reason):
        return self.value(samples, "plimsoll_agent_streams_ended_total", reason=reason)

    def wait_counts(self, before, expected, timeout=15):
        """Waits until every (kind, key) in `expected` grew by at least its delta; returns the
        samples. kind is "rejected" or "ended"; reports counters are published each tick."""
        def grown():
            now = self.metrics()
            for (kind, key), delta in expected.items():
                get = self.rejected if kind == "rejected" else self.ended
                if get(now, key) - get(before, key) < delta:
                    return None
            return now
        return wait_for("counters %s" % expected, grown, timeout=timeout, interval=0.5)

    def hostile_args(self):
        return ["--port", str(self.daemon.agent_port), "--uuid", self.hostile_uuid, "--token", self.hostile_token,
                "--max-bytes", str(GUEST_MIB * MIB)]

    def victim_ok(self, before):
        """The victim's agent data is fresh and its own, its balloon and management unchanged.
        An attack may end within one of the victim's report intervals (2 s): its next report
        is waited for."""
        accepted_before = int(before["agent"]["reports_accepted"])
        def next_report():
            g = self.guest("victim")
            return int(g.get("agent", {}).get("reports_accepted", 0)) > accepted_before and g
        g = wait_for("a report of the victim's accepted after the attack", next_report, timeout=10, interval=0.3)
        a = g.get("agent", {})
        self.assertTrue(a.get("connected"), a)
        self.assertTrue(a.get("fresh"), a)
        self.assertEqual(a.get("last_reject_reason", ""), "")
        self.assertEqual(g["stats"]["active_file"]["provenance"], "PROVENANCE_AGENT")
        self.assertEqual(g["management_state"], "MANAGEMENT_STATE_MANAGED")
        self.assertEqual(int(g["target_bytes"]), int(before["target_bytes"]))
        self.assertAlmostEqual(int(g["actual_bytes"]), int(before["actual_bytes"]), delta=MIB)
        return g

    def run_client(self, case, args, timeout=120):
        out = subprocess.run([SYSTEM_PYTHON, CLIENT, case] + args, capture_output=True, text=True, timeout=timeout)
        self.assertEqual(out.returncode, 0, "client %s failed:\n%s" % (case, out.stderr[-3000:]))
        return json.loads(out.stdout)

    def attack(self, name, case, args, during=None, timeout=180):
        """Runs one hostile client case while a latency probe calls GetHostStatus and the victim
        is sampled; asserts the latency bound and the victim's freshness; returns the client's
        JSON result."""
        victim_before = self.guest("victim")
        until = os.path.join(self.workdir, "until-" + case)
        ready = os.path.join(self.workdir, "ready-" + case)
        probe = subprocess.Popen([SYSTEM_PYTHON, CLIENT, "latency", "--socket", self.daemon.socket,
                                  "--until-file", until, "--ready-file", ready, "--min-calls", "50"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for("latency probe ready", lambda: os.path.exists(ready) or probe.poll() is not None, timeout=30,
                 interval=0.05)
        self.assertIsNone(probe.poll(), probe.stderr.read() if probe.poll() is not None else "")
        cpu0 = cpu_seconds(self.daemon.proc.pid)
        t0 = time.monotonic()
        client = subprocess.Popen([SYSTEM_PYTHON, CLIENT, case] + args, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            samples, stale = 0, []
            while client.poll() is None and time.monotonic() - t0 < timeout:
                if during:
                    during()
                g = self.guest("victim")
                samples += 1
                if not (g.get("agent", {}).get("fresh") and g["agent"].get("connected")):
                    stale.append(round(time.monotonic() - t0, 1))
                time.sleep(0.5)
            out, err = client.communicate(timeout=max(1, timeout - (time.monotonic() - t0)))
            attack_s = time.monotonic() - t0
            cpu = cpu_seconds(self.daemon.proc.pid) - cpu0
            open(until, "w").close()
            pout, perr = probe.communicate(timeout=60)
        finally:
            for p in (client, probe):  # only on a failure above: both have exited otherwise
                if p.poll() is None:
                    p.kill()
                    p.wait()
        self.assertEqual(client.returncode, 0, "client %s failed:\n%s" % (case, err[-3000:]))
        self.assertEqual(probe.returncode, 0, "latency probe failed:\n%s" % perr[-3000:])
        result = json.loads(out)
        lat = json.loads(pout)
        figure = ("%-26s attack %5.1fs  GetHostStatus p50 %6.2f ms p99 %6.2f ms max %6.2f ms (%d calls)  "
                  "plimsolld CPU %.2fs  victim samples %d  load %s" % (
                      name, attack_s, lat["p50_ms"], lat["p99_ms"], lat["max_ms"], lat["calls"], cpu, samples,
                      loadavg()))
        print("\n  " + figure)
        type(self).figures.append(figure)
        self.assertEqual(lat["errors"], [])
        self.assertGreaterEqual(lat["calls"], 50)
        self.assertLess(lat["p99_ms"], LATENCY_P99_MS, "control API slowed down by the attack")
        self.assertEqual(stale, [], "the victim's agent data went stale or disconnected during %s" % name)
        self.assertIsNone(self.daemon.proc.poll(), "plimsolld died")
        self.victim_ok(victim_before)
        return result

    def fell_back(self, name):
        g = self.guest(name)
        st = g["stats"]
        return (not g.get("agent", {}).get("fresh") and "active_file" not in st and "usable" in st
                and st["usable"].get("provenance") != "PROVENANCE_AGENT" and g)

    # ---- 1 ---------------------------------------------------------------------------------------
    def test_1_both_agents_report(self):
        for name in ("victim", "hostile"):
            g = wait_for(name + " agent signals", lambda: (
                self.guest(name).get("agent", {}).get("fresh") and "active_file" in self.guest(name)["stats"]
                and self.guest(name)), timeout=60)
            self.assertEqual(g["stats"]["active_file"]["provenance"], "PROVENANCE_AGENT")
            self.assertEqual(int(g["target_bytes"]), GUEST_MIB * MIB)
        # plimsolld runs with systemd's soft fd limit and must have raised it (see test_8).
        with open("/proc/%d/limits" % self.daemon.proc.pid) as f:
            soft = int(re.search(r"Max open files\s+(\d+)", f.read()).group(1))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        self.assertEqual(soft, hard)
        self.assertIn("file descriptor limit raised from %d" % SYSTEMD_SOFT_NOFILE, self.daemon.read_log())
        # The latency figure without an attack, for comparison.
        lat = self.run_client("latency", ["--socket", self.daemon.socket, "--until-file", "/", "--min-calls", "50"])
        figure = "no attack: GetHostStatus p50 %.2f ms p99 %.2f ms max %.2f ms (%d calls)  load %s" % (
            lat["p50_ms"], lat["p99_ms"], lat["max_ms"], lat["calls"], loadavg())
        print("\n  " + figure)
        type(self).figures.append(figure)
        self.assertEqual(lat["errors"], [])

    # ---- 2 ---------------------------------------------------------------------------------------
    def test_2_network_cut_to_an_agent(self):
        """The hostile guest's link goes down (QEMU set_link through libvirt): its agent data
        expires and it falls back to libvirt stats while the victim carries on; the link comes
        back and the agent reconnects by itself."""
        iflist = self.lab.virsh("domiflist", "hostile")
        mac = re.search(r"(([0-9a-f]{2}:){5}[0-9a-f]{2})", iflist).group(1)
        before = wait_for("hostile fresh", lambda: self.guest("hostile").get("agent", {}).get("fresh")
                          and self.guest("hostile"), timeout=30)
        victim_before = self.guest("victim")
        console_before = self.lab.console("hostile")
        connects_before = console_before.count("connected to plimsolld at")
        m0 = self.metrics()
        self.lab.virsh("domif-setlink", "hostile", mac, "down")
        t_cut = time.monotonic()
        try:
            self.assertIn("down", self.lab.virsh("domif-getlink", "hostile", mac))
            wait_for("hostile back on libvirt stats", lambda: self.fell_back("hostile"), timeout=30, interval=0.2)
            t_fell = time.monotonic() - t_cut
            # Keep it cut until the agent itself gives the stream up (seen so far: the guest's
            # kernel reports "No route to host" 10-12 s into the cut; otherwise its ack timeout,
            # 3 intervals + 10 s, ends it), so what follows is a real reconnection, not a TCP
            # retransmission catching up. Meanwhile the stale data must never be used again.
            violations = []

            def agent_gave_up():
                g = self.guest("hostile")
                if g["agent"].get("fresh") or "active_file" in g["stats"]:
                    violations.append("agent data used during the cut: %s" % g["agent"])
                if int(g["target_bytes"]) != int(before["target_bytes"]):
                    violations.append("target moved: %s" % g["target_bytes"])
                return "not connected to plimsolld" in self.lab.console("hostile")[len(console_before):]
            wait_for("the hostile guest's agent to give its stream up", agent_gave_up, timeout=60, interval=0.5)
            t_gave_up = time.monotonic() - t_cut
            self.assertEqual(violations, [])
            gave_up_line = [l for l in self.lab.console("hostile")[len(console_before):].splitlines()
                            if "not connected to plimsolld" in l][0]
            self.victim_ok(victim_before)
        finally:
            self.lab.virsh("domif-setlink", "hostile", mac, "up")
        t_up = time.monotonic()
        g = wait_for("hostile agent reconnected and fresh", lambda: (
            self.guest("hostile").get("agent", {}).get("fresh") and "active_file" in self.guest("hostile")["stats"]
            and self.guest("hostile")), timeout=60, interval=0.2)
        t_back = time.monotonic() - t_up
        wait_for("a new connection in the agent's log",
                 lambda: self.lab.console("hostile").count("connected to plimsolld at") > connects_before, timeout=10)
        self.assertEqual(g["management_state"], "MANAGEMENT_STATE_MANAGED")
        self.assertEqual(int(g["target_bytes"]), int(before["target_bytes"]))
        m1 = self.metrics()
        figure = ("network cut: fell back %.1fs after the cut, agent gave up at %.1fs, reconnected and fresh %.1fs "
                  "after link up (streams superseded +%d, timed out +%d)" % (
                      t_fell, t_gave_up, t_back, self.ended(m1, "superseded") - self.ended(m0, "superseded"),
                      self.ended(m1, "timeout") - self.ended(m0, "timeout")))
        print("\n  " + figure)
        print("  the agent said: " + gave_up_line.strip()[:300])
        type(self).figures.append(figure)
        self.victim_ok(victim_before)

    # ---- 3 ---------------------------------------------------------------------------------------
    def test_3_agent_killed(self):
        victim_before = self.guest("victim")
        wait_for("hostile fresh", lambda: self.guest("hostile").get("agent", {}).get("fresh"), timeout=30)
        open(self.stop_file, "w").close()
        t0 = time.monotonic()
        g = wait_for("hostile disconnected and on libvirt stats",
                     lambda: not self.guest("hostile")["agent"].get("connected") and self.fell_back("hostile"),
                     timeout=30, interval=0.2)
        figure = "agent killed: disconnected and fell back %.1fs after the kill" % (time.monotonic() - t0)
        print("\n  " + figure)
        type(self).figures.append(figure)
        self.assertEqual(g["management_state"], "MANAGEMENT_STATE_MANAGED")
        self.assertIn('plimsoll_guest_agent_connected{domain="hostile",uuid="%s"} 0' % self.hostile_uuid,
                      self.daemon.metrics())
        self.victim_ok(victim_before)

    # ---- 4 ---------------------------------------------------------------------------------------
    def test_4_spoofed_identity(self):
        """Root in the hostile guest has its token: it signs reports claiming the victim's uuid,
        sends none or a made-up proof, replays its own report onto another stream, and proves a
        uuid that is no guest of this host."""
        m0 = self.metrics()
        h0 = self.guest("hostile")
        repeat = 5
        r = self.attack("spoofed identity", "spoof", self.hostile_args() + [
            "--victim", self.victim_uuid, "--stranger", self.stranger_uuid, "--stranger-token", self.stranger_token,
            "--repeat", str(repeat)])
        by_kind = {}
        for kind, *outcome in r["attempts"]:
            by_kind.setdefault(kind, []).append(outcome)
        for kind in ("h_token_for_victim", "no_proof", "random_token"):
            self.assertEqual(by_kind[kind], [["ended", "PERMISSION_DENIED", "bad_proof"]] * repeat, kind)
        self.assertEqual(by_kind["replay_other_stream"], [["ended", "PERMISSION_DENIED", "replay"]])
        self.assertEqual(by_kind["unmanaged_uuid"], [["ack", False, "unknown_guest"]])
        m1 = self.wait_counts(m0, {("rejected", "bad_proof"): 3 * repeat, ("rejected", "replay"): 1,
                                   ("rejected", "unknown_guest"): 1, ("ended", "denied"): 3 * repeat + 1})
        # Nothing reached the hostile guest's own record either.
        h1 = self.guest("hostile")
        self.assertEqual(int(h1["agent"]["reports_accepted"]), int(h0["agent"]["reports_accepted"]))
        self.assertEqual(self.ended(m1, "denied") - self.ended(m0, "denied"), 3 * repeat + 1)

    # ---- 5 ---------------------------------------------------------------------------------------
    def test_5_absurd_values(self):
        m0 = self.metrics()
        h0 = self.guest("hostile")
        r = self.attack("absurd values", "absurd", self.hostile_args())
        steps = {s[0]: s[1:] for s in r["steps"]}
        self.assertEqual(steps.pop("baseline"), ["ack", True, ""])
        expect = {"memtotal_above_max": "size_out_of_range", "memtotal_2^63": "size_out_of_range",
                  "memtotal_zero": "size_out_of_range", "cached_u64_max": "size_out_of_range",
                  "active_file_above_memtotal": "size_out_of_range", "psi_avg10_1e9": "malformed",
                  "psi_avg10_nan": "malformed", "psi_avg10_negative": "malformed", "boottime_negative": "malformed",
                  "boot_id_garbage": "malformed", "refaults_to_u64_max": "implausible_rate",
                  "psi_total_jump": "implausible_rate"}
        self.assertEqual(steps, {k: ["ack", False, v] for k, v in expect.items()})
        self.wait_counts(m0, {("rejected", "size_out_of_range"): 5, ("rejected", "malformed"): 5,
                              ("rejected", "implausible_rate"): 2})
        # Only the baseline was stored: one more accepted report, and its age keeps growing
        # through the rejections that followed it (each paced 0.3 s apart).
        h1 = wait_for("the hostile guest's last rejection shown", lambda: (
            self.guest("hostile")["agent"].get("last_reject_reason") == "implausible_rate" and self.guest("hostile")),
            timeout=10)
        self.assertEqual(int(h1["agent"]["reports_accepted"]) - int(h0["agent"]["reports_accepted"]), 1)
        self.assertGreater(h1["agent"]["age_seconds"], 3.0)
        self.assertEqual(int(h1["target_bytes"]), GUEST_MIB * MIB)
        # The log says which guest sent what and why it was refused (within its rate limit).
        log = self.daemon.read_log()
        for reason in ("size_out_of_range", "malformed", "implausible_rate"):
            self.assertIn("agent report rejected: reason=%s uuid=%s" % (reason, self.hostile_uuid), log)

    # ---- 6 ---------------------------------------------------------------------------------------
    def test_6_counters_going_backwards(self):
        m0 = self.metrics()
        h0 = self.guest("hostile")
        r = self.attack("counters backwards", "backwards", self.hostile_args())
        self.assertEqual(r["steps"], [["baseline", "ack", True, ""],
                                      ["refaults_backwards", "ack", False, "counter_backwards"],
                                      ["psi_total_backwards", "ack", False, "counter_backwards"],
                                      ["boottime_not_after_last", "ack", False, "replay"],
                                      ["new_boot_low_counters", "ack", True, ""]])
        self.wait_counts(m0, {("rejected", "counter_backwards"): 2, ("rejected", "replay"): 1})
        h1 = wait_for("two more accepted reports of the hostile guest", lambda: (
            int(self.guest("hostile")["agent"]["reports_accepted"]) - int(h0["agent"]["reports_accepted"]) == 2
            and self.guest("hostile")), timeout=10)
        self.assertEqual(int(h1["target_bytes"]), GUEST_MIB * MIB)

    # ---- 7 ---------------------------------------------------------------------------------------
    def test_7_oversized_messages(self):
        m0 = self.metrics()
        r = self.attack("oversized messages", "oversized", self.hostile_args())
        steps = {s[0]: s[1:] for s in r["steps"]}
        self.assertEqual(steps["report_6KiB"], ["ack", False, "oversized"])
        self.assertEqual(steps["report_after_it_same_stream"], ["ack", True, ""])
        # Above the 16 KiB transport limit gRPC ends the stream before our code sees the frame
        # (not counted by reason, docs/security.md); the daemon carries on.
        for big in ("frame_20KiB", "frame_4096KiB"):
            self.assertEqual(steps[big][:2], ["ended", "RESOURCE_EXHAUSTED"], big)
        self.assertEqual(steps["normal_after"], ["ack", True, ""])
        self.wait_counts(m0, {("rejected", "oversized"): 1})

    # ---- 8 ---------------------------------------------------------------------------------------
    def test_8_thousands_of_connections_and_slow_streams(self):
        """900 TCP connections that never speak HTTP/2, 10 streams trickling junk every 2 s and
        1100 silent streams, each on its own connection: the stream limit refuses what is over
        it, every stream that never proves an identity is ended after auth_timeout, the raw
        connections are closed by the handshake deadline. plimsolld runs with systemd's soft fd
        limit of 1024, which such an attack exhausted before plimsolld raised it."""
        m0 = self.metrics()
        peak = os.path.join(self.workdir, "conns-peak")
        fds = []
        seen_active = []

        def at_peak():
            if os.path.exists(peak) and not seen_active:
                seen_active.append(self.value(self.metrics(), "plimsoll_agent_streams_active"))
                fds.append(len(os.listdir("/proc/%d/fd" % self.daemon.proc.pid)))

        streams, raw, trickle = 1100, 900, 10
        r = self.attack("2000 connections, slow", "conns", [
            "--port", str(self.daemon.agent_port), "--streams", str(streams), "--raw", str(raw),
            "--trickle", str(trickle), "--peak-file", peak, "--wait", "60"], during=at_peak)
        print("  conns: %s" % json.dumps({k: r[k] for k in (
            "open_s", "silent_hello", "silent_refused", "lifetime_s_min", "lifetime_s_max", "raw_all_closed_after_s",
            "trickle_frames_sent", "client_cpu_s")}))
        print("  plimsolld at the peak: %s streams active, %s open fds" % (seen_active, fds))
        self.assertEqual(r["raw_connected"], raw)
        self.assertEqual(r["silent_other"], [])
        admitted = r["silent_hello"] + trickle
        # The victim's stream holds one slot; everything else over the limit was refused.
        self.assertLessEqual(admitted, MAX_STREAMS - 1)
        self.assertEqual(r["silent_hello"] + r["silent_refused"], streams)
        self.assertGreaterEqual(r["silent_refused"], streams + trickle - (MAX_STREAMS - 1))
        if seen_active:
            self.assertLessEqual(seen_active[0], MAX_STREAMS)
        # Every admitted stream, the trickling ones too, was ended by plimsolld for want of a proof.
        self.assertEqual(r["admitted_ends"], {"DEADLINE_EXCEEDED:no proven report within %ds" % AUTH_TIMEOUT_S: admitted})
        self.assertGreaterEqual(r["lifetime_s_min"], AUTH_TIMEOUT_S - 0.5)
        self.assertGreaterEqual(r["trickle_frames_sent"], trickle * 3)
        self.assertEqual(r["raw_closed_by_server"], raw)
        m1 = self.wait_counts(m0, {("ended", "timeout"): admitted, ("rejected", "malformed"): r["trickle_frames_sent"]})
        self.assertEqual(self.value(m1, "plimsoll_agent_streams_refused_total")
                         - self.value(m0, "plimsoll_agent_streams_refused_total"), r["silent_refused"])
        self.assertLessEqual(self.value(m1, "plimsoll_agent_streams_active"), 2)

    # ---- 9 ---------------------------------------------------------------------------------------
    def test_9_flood(self):
        """The hostile guest's identity, frames written as fast as the client can, a cut stream
        replaced at once: each stream is cut at its frame budget, the guest is held to its report
        budget, and both are counted."""
        m0 = self.metrics()
        h0 = self.guest("hostile")
        seconds = 8
        r = self.attack("flood", "flood", self.hostile_args() + ["--seconds", str(seconds)])
        print("  flood: %s" % json.dumps(r))
        self.assertGreater(r["streams"], 5)
        flooded = r["ends"].get("RESOURCE_EXHAUSTED:flood", 0)
        # All but the stream the client itself closed at the end were cut by plimsolld.
        self.assertGreaterEqual(flooded, r["streams"] - 1)
        self.assertLessEqual(r["acks_per_stream_max"], FRAME_BURST)
        self.assertGreater(r["rejects"].get("rate_limited", 0), 0)
        self.assertEqual(set(r["rejects"]), {"rate_limited"})
        # The guest's own budget: at most its burst plus its rate over the attack (with slack for
        # the seconds around it).
        self.assertLessEqual(r["accepted"], GUEST_BURST + GUEST_RATE * (seconds + 3))
        self.wait_counts(m0, {("rejected", "flood"): flooded, ("ended", "flood"): flooded,
                              ("rejected", "rate_limited"): r["rejects"]["rate_limited"]})
        # Every stream cut for flooding is one flood rejection. The server may cut one more than
        # the client saw (the stream it was closing itself), and the rejections are published
        # with the next tick while the ends are read at the scrape: the two agree once a tick
        # has passed.
        def flood_counts():
            m = self.metrics()
            return (self.ended(m, "flood") - self.ended(m0, "flood"),
                    self.rejected(m, "flood") - self.rejected(m0, "flood"))
        wait_for("every flood end to be counted as a flood rejection",
                 lambda: flood_counts()[0] == flood_counts()[1], timeout=10)
        ends, rejects = flood_counts()
        self.assertEqual(ends, rejects)
        self.assertLessEqual(ends - flooded, 1)
        # plimsolld counts every report it accepted; the client only those whose ack reached it
        # before plimsolld cut the stream, so plimsolld's count may be higher (it once was, in a
        # full CI run: the equality timed out). Both stay within the guest's budget.
        def accepted_delta():
            return (int(self.guest("hostile")["agent"]["reports_accepted"])
                    - int(h0["agent"]["reports_accepted"]))
        wait_for("the hostile guest's accepted count to reach the client's",
                 lambda: accepted_delta() >= r["accepted"], timeout=10)
        delta = accepted_delta()
        print("  flood: plimsolld accepted %d, the client saw %d acks accepted" % (delta, r["accepted"]))
        self.assertLessEqual(delta, GUEST_BURST + GUEST_RATE * (seconds + 3))
        self.assertEqual(int(self.guest("hostile")["target_bytes"]), GUEST_MIB * MIB)


if __name__ == "__main__":
    unittest.main(verbosity=2)
