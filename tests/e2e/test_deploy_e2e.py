#!/usr/bin/python3
"""The deploy/ artefacts against the real thing.

PromtoolChecks      promtool check config / check rules / test rules on deploy/prometheus
                    (alerts_test.yml fires every alert on made-up series).
DashboardStructure  deploy/grafana/plimsoll-dashboard.json is an importable Grafana dashboard.
DeployLabE2E        a lab of two real guests (idle + stream, 1024 MiB each, both running
                    plimsoll-agent) managed by plimsolld (mom, tick 1s, budget 1536 MiB) and a
                    real Prometheus loaded with deploy/prometheus/prometheus.yml and alerts.yml,
                    scraping every second. Every expression of the dashboard and of the alert
                    rules is run through Prometheus' HTTP API and must return series, except the
                    few listed below with their reason. To make alerts true on purpose, and to
                    give every series the rules and the dashboard name, the lab also has: a
                    scrape target nobody listens on (PlimsollDown), a plimsolld whose libvirt
                    socket does not exist (PlimsollLibvirtDisconnected, PlimsollLibvirtErrors), a
                    dry-run plimsolld under the pagecache policy with a 400 MiB budget
                    (PlimsollHostOverBudget; plimsoll_guest_state), idle's agent stopped
                    (PlimsollAgentDisconnected), idle paused for the last seconds
                    (PlimsollGuestStatsStale), and an agent on the host with a made-up token
                    (rejected reports).
DebPackage          tools/build_deb.sh --fastbuild (or $PLIMSOLL_DEB and $PLIMSOLL_AGENT_DEB), both packages:
                    the host's (plimsoll): dpkg-deb --info/--contents, apt-get install,
                    plimsolld --check_config from /usr/bin, systemd-analyze verify, apt-get
                    remove and purge; the guest's (plimsoll-agent): its contents and Depends (no
                    libvirt, no prometheus-cpp), dpkg -i next to the host package (no file
                    conflict), the binary, unit and udev rule in place and agreeing with each
                    other, systemd-analyze verify, dpkg -r and --purge. The machine (a VM
                    itself, so as much a guest as the lab's) is left as it was.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
import uuid

import harness
from harness import MIB, wait_for

REPO = harness.REPO
PROM_DIR = os.path.join(REPO, "deploy", "prometheus")
PROM_CONFIG = os.path.join(PROM_DIR, "prometheus.yml")
ALERTS = os.path.join(PROM_DIR, "alerts.yml")
ALERTS_TEST = os.path.join(PROM_DIR, "alerts_test.yml")
FLEET_RULES = os.path.join(PROM_DIR, "fleet_rules.yml")
FLEET_RULES_TEST = os.path.join(PROM_DIR, "fleet_rules_test.yml")
DASHBOARD = os.path.join(REPO, "deploy", "grafana", "plimsoll-dashboard.json")
BUILD_DEB = os.path.join(REPO, "tools", "build_deb.sh")

BUDGET_MIB = 1536
DRYRUN_BUDGET_MIB = 400    # below the two guests' floors together (2 x 256 MiB): always over
GUESTS = [("idle", "idle"), ("stream", "stream")]
DAEMON_FLAGS = dict(tick="1s", stats_period_seconds=1, stale_after="5s", host_reserve_bytes=0,
                    policy="mom")
DATA_SECONDS = 20          # of scrapes before any query runs
PAUSED_GUEST = "idle"
AGENT_STOPPED_GUEST = "idle"
DASHBOARD_DOMAIN = "stream"  # $domain in the dashboard's queries: running, agent reporting

# Alert rules whose bare expression may legitimately return nothing here, and why. The query
# must still parse and run, and every series it names (but ABSENT_METRICS) must exist, so an
# empty answer means "condition false", not "misspelt metric". alerts_test.yml makes each of
# them fire on made-up series.
EXPECTED_EMPTY_ALERTS = {
    "PlimsollGuestStuck":
        "every lab balloon follows its target; a balloon that refuses to move cannot be made "
        "within this test's time (a paused guest only stops its stats, which holds it)",
    "PlimsollGuestUnderPressure":
        "the guests keep hundreds of MiB of MemAvailable; stream's PSI (from its agent) may pass "
        "10% while MoM shrinks it, or may not, within the 20 s the lab runs",
}
# Alerts the lab makes true on purpose, and how. Each must be pending or firing in
# /api/v1/rules (the `for` durations are minutes, so most are pending), on the series the trick
# is about (checked alert by alert in test_3).
TRIGGERED = {
    "PlimsollDown": "a scrape target nobody listens on",
    "PlimsollLibvirtDisconnected": "a plimsolld whose libvirt socket does not exist",
    "PlimsollLibvirtErrors": "the same plimsolld failing to connect again and again",
    "PlimsollHostOverBudget": "a dry-run plimsolld with a %d MiB guest budget" % DRYRUN_BUDGET_MIB,
    "PlimsollHostOverLine": "the same dry-run plimsolld: its guests' sizes alone are over its %d MiB" % DRYRUN_BUDGET_MIB,
    "PlimsollGuestStatsStale": "guest %s paused: its balloon stats stop" % PAUSED_GUEST,
    "PlimsollAgentDisconnected": "guest %s's agent stopped" % AGENT_STOPPED_GUEST,
}
# Series the rules or the dashboard name that the lab cannot produce, with the reason; their
# clauses are only checked to parse and run. None at the moment.
ABSENT_METRICS = {}
# Dashboard expressions that may legitimately return nothing here. None: the plimsolld that
# cannot reach libvirt fills the libvirt-errors panel, the host-side agent with a made-up
# token the rejected-reports one.
EXPECTED_EMPTY_DASHBOARD = {}
RATE_INTERVAL = "30s"       # $__rate_interval


def alert_names():
    with open(ALERTS) as f:
        return re.findall(r"^\s*- alert:\s*(\w+)", f.read(), re.M)


def prom_api(port, path, params=None, timeout=10):
    """GET a Prometheus API path; returns the JSON body, also for 4xx/5xx answers."""
    url = "http://127.0.0.1:%d%s" % (port, path)
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        body = e.read().decode(errors="replace")
        try:
            return json.loads(body)
        except ValueError:
            return {"status": "error", "error": "HTTP %d: %s" % (e.code, body[:300])}


def lab_prometheus_config(text, targets):
    """deploy/prometheus/prometheus.yml with the lab's targets and 1 s intervals."""
    default = "'127.0.0.1:9587'"
    if text.count(default) != 1:
        raise AssertionError("prometheus.yml must list the target %s exactly once" % default)
    text = text.replace(default, ", ".join("'%s'" % t for t in targets))
    text, n = re.subn(r"(?m)^(\s*(?:scrape_interval|evaluation_interval|scrape_timeout):)\s*\S+",
                      r"\1 1s", text)
    if n < 3:
        raise AssertionError("prometheus.yml: expected global and job intervals, found %d" % n)
    return text


class DeployPrometheus(harness.Prometheus):
    """A real Prometheus running deploy/prometheus/prometheus.yml and alerts.yml (copied, with
    the lab's targets and 1 s intervals). query() and stop() come from harness.Prometheus."""

    def __init__(self, workdir, targets):  # pylint: disable=super-init-not-called
        self.port = harness.free_port()
        self.dir = tempfile.mkdtemp(prefix="prom-deploy-", dir=workdir)
        shutil.copy(ALERTS, self.dir)
        with open(PROM_CONFIG) as f:
            text = lab_prometheus_config(f.read(), targets)
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write(text)
        check = subprocess.run(["promtool", "check", "config", self.config], capture_output=True,
                               text=True, timeout=60)
        if check.returncode != 0:
            raise AssertionError("promtool rejects the lab config:\n%s%s" % (check.stdout, check.stderr))
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=" + self.config,
             "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.started = time.monotonic()
        wait_for("prometheus ready", self._ready, 30)

    def api(self, path, params=None):
        return prom_api(self.port, path, params)


# ----------------------------------------------------------------------------- dashboard

def walk_exprs(node, path="$"):
    """Every "expr" string anywhere in the dashboard JSON: [(json path, expr)]."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "expr" and isinstance(v, str):
                title = node.get("refId") or node.get("name") or ""
                out.append(("%s (%s)" % (path, title), v))
            else:
                out.extend(walk_exprs(v, "%s.%s" % (path, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            label = v.get("title") if isinstance(v, dict) and v.get("title") else str(i)
            out.extend(walk_exprs(v, "%s[%s]" % (path, label)))
    return out


def grafana_regex_all(values):
    """What Grafana puts in place of a multi-value variable set to All, for Prometheus."""
    return "(" + "|".join(re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", v) for v in values) + ")"


def substitute(expr, variables):
    def repl(m):
        name = m.group(1) or m.group(2)
        if name not in variables:
            raise KeyError("unknown dashboard variable $%s in %s" % (name, expr))
        return variables[name]
    out = re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)
    if "$" in out or "[[" in out:
        raise AssertionError("unsubstituted variable left in %s" % out)
    return out


def label_values(definition):
    """label_values(SELECTOR, LABEL) -> (SELECTOR, LABEL)."""
    m = re.match(r"^label_values\((.*),\s*(\w+)\)$", definition.strip())
    if not m:
        raise AssertionError("template query %r is not label_values(selector, label)" % definition)
    return m.group(1), m.group(2)


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


# ----------------------------------------------------------------------------- tests

@unittest.skipIf(shutil.which("promtool") is None, "promtool is not installed (apt-get install prometheus)")
class PromtoolChecks(unittest.TestCase):
    def promtool(self, *args):
        out = subprocess.run(["promtool"] + list(args), capture_output=True, text=True,
                             timeout=120, cwd=PROM_DIR)
        self.assertEqual(out.returncode, 0, "promtool %s:\n%s%s" % (" ".join(args), out.stdout, out.stderr))
        return out.stdout + out.stderr

    def test_check_config(self):
        out = self.promtool("check", "config", PROM_CONFIG)
        self.assertIn("SUCCESS", out)
        self.assertIn("1 rule files found", out)

    def test_check_rules(self):
        out = self.promtool("check", "rules", ALERTS)
        self.assertIn("SUCCESS: %d rules found" % len(alert_names()), out)
        self.assertEqual(len(alert_names()), 9)

    def test_rule_unit_tests_fire_every_alert(self):
        self.promtool("test", "rules", ALERTS_TEST)
        with open(ALERTS_TEST) as f:
            tested = set(re.findall(r"alertname:\s*(\w+)", f.read()))
        self.assertEqual(tested, set(alert_names()), "every alert needs a unit test")

    def test_fleet_rules_check_and_unit_tests(self):
        # The fleet view's recording rules (not loaded by prometheus.yml: a fleet Prometheus's).
        out = self.promtool("check", "rules", FLEET_RULES)
        with open(FLEET_RULES) as f:
            records = re.findall(r"^\s*- record:\s*(\S+)", f.read(), re.M)
        self.assertIn("SUCCESS: %d rules found" % len(records), out)
        self.promtool("test", "rules", FLEET_RULES_TEST)
        with open(FLEET_RULES_TEST) as f:
            tested = set(re.findall(r"^\s*- expr:\s*(\S+)", f.read(), re.M))
        self.assertEqual(tested, set(records), "every fleet rule needs a unit test")

    def test_lab_config_rewrite(self):
        # The e2e lab rewrites prometheus.yml; the rewrite must keep it valid.
        with open(PROM_CONFIG) as f:
            text = lab_prometheus_config(f.read(), ["127.0.0.1:1", "127.0.0.1:2"])
        d = tempfile.mkdtemp(prefix="plimsoll-promcfg-")
        try:
            shutil.copy(ALERTS, d)
            with open(os.path.join(d, "prometheus.yml"), "w") as f:
                f.write(text)
            self.promtool("check", "config", os.path.join(d, "prometheus.yml"))
        finally:
            shutil.rmtree(d)


class DashboardStructure(unittest.TestCase):
    def test_importable_dashboard(self):
        d = load_dashboard()
        self.assertGreaterEqual(d["schemaVersion"], 36)
        self.assertEqual([i["name"] for i in d["__inputs"]], ["DS_PROMETHEUS"])
        variables = {v["name"]: v for v in d["templating"]["list"]}
        self.assertEqual(variables["DS_PROMETHEUS"]["type"], "datasource")
        self.assertEqual(variables["DS_PROMETHEUS"]["query"], "prometheus")
        for name in ("job", "instance", "domain"):
            self.assertEqual(variables[name]["type"], "query", name)
            label_values(variables[name]["definition"])
        ids = [p["id"] for p in all_panels(d["panels"])]
        self.assertEqual(len(ids), len(set(ids)), "panel ids must be unique")
        for p in all_panels(d["panels"]):
            self.assertIn("gridPos", p, p.get("title"))
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, p["title"])
            self.assertTrue(p["targets"], p["title"])
            refs = [t["refId"] for t in p["targets"]]
            self.assertEqual(len(refs), len(set(refs)), p["title"])
            for t in p["targets"]:
                self.assertEqual(t["datasource"]["uid"], "${DS_PROMETHEUS}", p["title"])
        titles = " | ".join(p["title"] for p in all_panels(d["panels"]))
        for needed in ("budget", "PSI", "target vs actual", "Stats age", "Decisions", "libvirt errors",
                       "Tick duration", "Plimsoll line"):
            self.assertIn(needed, titles)
        repeated = [p for p in all_panels(d["panels"]) if p.get("repeat")]
        self.assertEqual([p["repeat"] for p in repeated], ["domain"])

    def test_metric_names_exist_in_plimsolld(self):
        # Every plimsoll_* name the dashboard and rules use is declared in server/metrics/metrics.cc
        # (histograms add _bucket/_sum/_count), or is listed in ABSENT_METRICS.
        with open(os.path.join(REPO, "server", "metrics", "metrics.cc")) as f:
            declared = set(re.findall(r'"(plimsoll_[a-z0-9_]+)"', f.read()))
        declared |= {n + s for n in declared for s in ("_bucket", "_sum", "_count")}
        with open(DASHBOARD) as f, open(ALERTS) as g:
            used = set(re.findall(r"\b(plimsoll_[a-z0-9_]+)\b", f.read() + g.read()))
        unknown = used - declared - set(ABSENT_METRICS)
        self.assertFalse(unknown, "names not declared in server/metrics/metrics.cc: %s" % sorted(unknown))


def _lab_skip_reason():
    reason = harness.skip_reason()
    if reason:
        return reason
    if shutil.which("prometheus") is None:
        return "prometheus is not installed (apt-get install prometheus)"
    for b in (harness.AGENT, harness.AGENT_TOKEN):
        if not os.path.exists(b):
            return "%s is not built (bazel build //...)" % b
    return None


@unittest.skipIf(_lab_skip_reason(), _lab_skip_reason())
class DeployLabE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        t0 = time.monotonic()
        cls.workdir = tempfile.mkdtemp(prefix="plimsoll-deploy-e2e-")
        cls.daemons = {}
        cls.prom = None
        cls.spoofer = None
        cls.lab = harness.labmod.Lab(state_dir=os.path.join(cls.workdir, "lab"),
                                     workload_bin=harness.WORKLOAD)
        try:
            cls._start(t0)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _start(cls, t0):
        cls.lab.start()
        keys = harness.AgentKeys(cls.workdir)
        cls.agent_stop_file = os.path.join(cls.workdir, "stop-%s-agent" % AGENT_STOPPED_GUEST)
        for name, workload in GUESTS:
            stop = cls.agent_stop_file if name == AGENT_STOPPED_GUEST else None
            cls.lab.add_guest(name, workload=workload, memory_mib=1024,
                              **keys.guest_kwargs(stop_file=stop, extra_args=("--max_backoff=2s",)))
        for name, _ in GUESTS:
            cls.lab.wait_ready(name, timeout=90)
        t_lab = time.monotonic()

        def daemon(key, uri, **flags):
            d = os.path.join(cls.workdir, key)
            os.mkdir(d)
            cls.daemons[key] = harness.Daemon(d, uri, **flags)
            return cls.daemons[key]

        daemon("main", cls.lab.uri, agent_keys=keys, agent_stale_after="4s",
               guest_memory_budget_bytes=BUDGET_MIB * MIB, **DAEMON_FLAGS)
        daemon("dryrun", cls.lab.uri, guest_memory_budget_bytes=DRYRUN_BUDGET_MIB * MIB, dry_run="true",
               **dict(DAEMON_FLAGS, policy="pagecache"))
        daemon("nolibvirt", "qemu+unix:///system?socket=%s/no-such-libvirt.sock" % cls.workdir,
               tick="1s")
        # An agent on the host with a token nobody issued: its reports are rejected.
        spoof_dir = os.path.join(cls.workdir, "spoofer")
        os.mkdir(spoof_dir)
        with open(os.path.join(spoof_dir, "token"), "w") as f:
            f.write("00" * 32 + "\n")
        with open(os.path.join(spoof_dir, "uuid"), "w") as f:
            f.write(str(uuid.uuid4()) + "\n")
        cls.spoofer_log = open(os.path.join(spoof_dir, "agent.log"), "w")
        cls.spoofer = subprocess.Popen(
            [harness.AGENT, "--server=127.0.0.1:%d" % keys.port, "--interval=1s", "--max_backoff=1s",
             "--token_file=" + os.path.join(spoof_dir, "token"),
             "--uuid_file=" + os.path.join(spoof_dir, "uuid")],
            stdout=cls.spoofer_log, stderr=subprocess.STDOUT)
        cls.instances = {k: "127.0.0.1:%d" % d.metrics_port for k, d in cls.daemons.items()}
        cls.dead_target = "127.0.0.1:%d" % harness.free_port()
        cls.prom = DeployPrometheus(cls.workdir, list(cls.instances.values()) + [cls.dead_target])
        prom = cls.prom
        wait_for("main plimsolld's guests in Prometheus",
                 lambda: len(prom.query('plimsoll_guest_stats_fresh{instance="%s"} == 1'
                                        % cls.instances["main"])) == len(GUESTS), timeout=30)
        main = cls.instances["main"]
        wait_for("both guests' agents connected to the main plimsolld",
                 lambda: len(prom.query('plimsoll_guest_agent_connected{instance="%s"} == 1' % main))
                 == len(GUESTS), timeout=45)
        open(cls.agent_stop_file, "w").close()
        wait_for("%s's agent disconnected" % AGENT_STOPPED_GUEST,
                 lambda: prom.query('plimsoll_guest_agent_connected{instance="%s", domain="%s"} == 0'
                                    % (main, AGENT_STOPPED_GUEST)), timeout=30)
        # Let the main plimsolld decide for a while, then stop the idle guest's stats. Right
        # after the pause the stats may vanish for a tick and advance once more, so wait until
        # they have stood still for longer than stale_after (5 s), with the usable series back.
        time.sleep(max(0.0, prom.started + DATA_SECONDS - 15 - time.monotonic()))
        cls.lab.virsh("suspend", PAUSED_GUEST)
        wait_for("paused guest's stats stale in Prometheus",
                 lambda: prom.query('plimsoll_guest_stats_age_seconds{instance="%s", domain="%s"} > 7 '
                                    'and on (instance, uuid) plimsoll_guest_usable_bytes'
                                    % (cls.instances["main"], PAUSED_GUEST)), timeout=30)
        time.sleep(max(0.0, prom.started + DATA_SECONDS - time.monotonic()))
        print("\n  lab %.1fs, daemons+prometheus+%ds of data %.1fs" % (
            t_lab - t0, DATA_SECONDS, time.monotonic() - t_lab))

    @classmethod
    def tearDownClass(cls):
        if cls.spoofer and cls.spoofer.poll() is None:
            cls.spoofer.kill()
            cls.spoofer.wait()
            cls.spoofer_log.close()
        if cls.prom:
            cls.prom.stop()
        for d in cls.daemons.values():
            d.stop()
        cls.lab.stop()

    def query_ok(self, expr, failures, where, allow_empty=False, range_query=False):
        """Runs expr (instant, and over the last DATA_SECONDS when range_query); records failures."""
        body = self.prom.api("/api/v1/query", {"query": expr})
        if body.get("status") != "success":
            failures.append("%s: query error %s: %s\n    %s" % (where, body.get("errorType"),
                                                               body.get("error"), expr))
            return None
        result = body["data"]["result"]
        if not result and not allow_empty:
            failures.append("%s: no series\n    %s" % (where, expr))
        if range_query:
            now = time.time()
            body = self.prom.api("/api/v1/query_range", {"query": expr, "start": now - DATA_SECONDS,
                                                         "end": now, "step": "2s"})
            if body.get("status") != "success":
                failures.append("%s: range query error %s\n    %s" % (where, body.get("error"), expr))
            elif not body["data"]["result"] and not allow_empty:
                failures.append("%s: no series over the last %ds\n    %s" % (where, DATA_SECONDS, expr))
        return result

    def test_1_rules_loaded_and_healthy(self):
        body = self.prom.api("/api/v1/rules")
        self.assertEqual(body["status"], "success")
        rules = {r["name"]: r for g in body["data"]["groups"] for r in g["rules"]}
        self.assertEqual(sorted(rules), sorted(alert_names()))
        for name, r in rules.items():
            self.assertEqual(r["type"], "alerting", name)
            self.assertEqual(r["health"], "ok", "%s: %s" % (name, r.get("lastError")))
            self.assertFalse(r.get("lastError"), name)

    def test_2_every_dashboard_query_returns_data(self):
        d = load_dashboard()
        variables = {"job": "plimsolld", "__rate_interval": RATE_INTERVAL, "__interval": "2s",
                     "__range": "%ds" % DATA_SECONDS}
        failures = []
        # Template variables first, in order, the way Grafana resolves them; $instance is "All".
        tvars = {v["name"]: v for v in d["templating"]["list"] if v["type"] == "query"}
        selector, label = label_values(tvars["job"]["definition"])
        jobs = {s[0][label] for s in self.prom.query(substitute(selector, variables))}
        self.assertIn("plimsolld", jobs)
        selector, label = label_values(tvars["instance"]["definition"])
        instances = sorted({s[0][label] for s in self.prom.query(substitute(selector, variables))})
        self.assertEqual(instances, sorted(self.instances.values()))
        variables["instance"] = grafana_regex_all(instances)
        selector, label = label_values(tvars["domain"]["definition"])
        domains = sorted({s[0][label] for s in self.prom.query(substitute(selector, variables))})
        self.assertEqual(domains, sorted(n for n, _ in GUESTS))
        variables["domain"] = DASHBOARD_DOMAIN

        exprs = walk_exprs(d)
        t0 = time.monotonic()
        range_exprs = {t["expr"] for p in all_panels(d["panels"]) for t in p.get("targets", [])
                       if t.get("range")}
        for where, expr in exprs:
            q = substitute(expr, variables)
            self.query_ok(q, failures, where, allow_empty=expr in EXPECTED_EMPTY_DASHBOARD,
                          range_query=expr in range_exprs)
        print("\n  %d dashboard expressions (%d also as range queries) in %.2fs; $instance=%s $domain=%s" % (
            len(exprs), len(range_exprs), time.monotonic() - t0, variables["instance"], DASHBOARD_DOMAIN))
        self.assertGreaterEqual(len(exprs), 30)
        if failures:
            self.fail("\n".join(["%d dashboard queries failed:" % len(failures)] + failures))

    def test_3_every_alert_expression_runs_and_the_triggered_ones_fire(self):
        body = self.prom.api("/api/v1/rules")
        rules = {r["name"]: r for g in body["data"]["groups"] for r in g["rules"]}
        failures = []
        for name in alert_names():
            expr = rules[name]["query"]
            result = self.query_ok(expr, failures, "alert %s" % name, allow_empty=name in EXPECTED_EMPTY_ALERTS)
            if name in EXPECTED_EMPTY_ALERTS and result:
                print("\n  note: %s's expression returned %s" % (name, ", ".join(
                    "%s{%s}=%.4g" % (s["metric"].get("__name__", ""), ",".join(
                        "%s=%s" % kv for kv in sorted(s["metric"].items()) if kv[0] in ("instance", "domain", "state")),
                        float(s["value"][1])) for s in result)))
            # Every series the expression names exists (but the listed absent ones), so an
            # empty answer can only mean the condition is false.
            for metric in sorted(set(re.findall(r"\b(plimsoll_[a-z0-9_]+|up)\b", expr))):
                present = self.prom.query('count({__name__="%s"})' % metric)
                if metric in ABSENT_METRICS:
                    if present:
                        print("\n  note: %s now exists: drop it from ABSENT_METRICS" % metric)
                    continue
                if not present:
                    failures.append("alert %s names %s, which has no series" % (name, metric))
        if failures:
            self.fail("\n".join(["alert expressions failed:"] + failures))

        inst = self.instances

        def alerts_of(name):
            return [a["labels"] for a in rules[name].get("alerts", [])]

        def all_active():
            fresh = self.prom.api("/api/v1/rules")
            rules.update({r["name"]: r for g in fresh["data"]["groups"] for r in g["rules"]})
            return all(rules[n]["state"] in ("pending", "firing") for n in TRIGGERED) and \
                (inst["main"], PAUSED_GUEST) in {(a.get("instance"), a.get("domain"))
                                                 for a in alerts_of("PlimsollGuestStatsStale")}

        try:  # rules are evaluated every second; allow a few evaluations
            wait_for("triggered alerts pending or firing", all_active, timeout=10)
        except AssertionError:
            pass  # the assertions below say which one
        for name, how in TRIGGERED.items():
            self.assertIn(rules[name]["state"], ("pending", "firing"), "%s (%s): %s" % (
                name, how, rules[name]))
        self.assertIn(self.dead_target, [a["instance"] for a in alerts_of("PlimsollDown")])
        self.assertNotIn(inst["main"], [a["instance"] for a in alerts_of("PlimsollDown")])
        self.assertEqual([a["instance"] for a in alerts_of("PlimsollLibvirtDisconnected")], [inst["nolibvirt"]])
        self.assertEqual({(a["instance"], a["operation"]) for a in alerts_of("PlimsollLibvirtErrors")},
                         {(inst["nolibvirt"], "connect")})
        self.assertEqual(rules["PlimsollLibvirtErrors"]["state"], "firing")  # for: 0m
        self.assertIn(inst["dryrun"], [a["instance"] for a in alerts_of("PlimsollHostOverBudget")])
        self.assertIn(inst["dryrun"], [a["instance"] for a in alerts_of("PlimsollHostOverLine")])
        self.assertEqual({(a["instance"], a["domain"]) for a in alerts_of("PlimsollAgentDisconnected")},
                         {(inst["main"], AGENT_STOPPED_GUEST)})
        stale = {(a["instance"], a["domain"]) for a in alerts_of("PlimsollGuestStatsStale")}
        self.assertIn((inst["main"], PAUSED_GUEST), stale)
        self.assertNotIn((inst["main"], "stream"), stale)
        print("\n  alerts: %s" % ", ".join("%s=%s" % (n, rules[n]["state"]) for n in alert_names()))


def _dpkg_status(pkg):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def _deb_skip_reason():
    if os.geteuid() != 0:
        return "installing the Debian package needs root"
    for tool in ("dpkg-deb", "apt-get"):
        if shutil.which(tool) is None:
            return "%s is not available" % tool
    for pkg in ("plimsoll", "plimsoll-agent"):
        status = _dpkg_status(pkg)
        if status and "not-installed" not in status:
            return "a %s package is already on this machine (%s); not replacing it" % (pkg, status)
    return None


@unittest.skipIf(_deb_skip_reason(), _deb_skip_reason())
class DebPackage(unittest.TestCase):
    APT = ["apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=120"]

    def run_ok(self, args, timeout=300, **kw):
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                             env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), **kw)
        self.assertEqual(out.returncode, 0, "%s failed (%d):\n%s\n%s" % (
            " ".join(args), out.returncode, out.stdout[-3000:], out.stderr[-3000:]))
        return out.stdout

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="plimsoll-deb-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(self.purge)

    def purge(self):
        # Whatever happened, leave no plimsoll package (nor its conffiles) behind.
        for pkg in ("plimsoll-agent", "plimsoll"):
            if _dpkg_status(pkg):
                subprocess.run(self.APT + ["purge", pkg], capture_output=True, timeout=300,
                               env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))

    _built = None  # (host .deb, guest .deb or None), built once for the class

    def get_debs(self):
        """(host .deb, guest .deb or None, built here)."""
        prebuilt = os.environ.get("PLIMSOLL_DEB")
        if prebuilt:
            agent = os.environ.get("PLIMSOLL_AGENT_DEB")
            return os.path.abspath(prebuilt), os.path.abspath(agent) if agent else None, False
        if DebPackage._built is None:
            out_dir = tempfile.mkdtemp(prefix="plimsoll-debs-")
            t0 = time.monotonic()
            # --fastbuild: the binaries the suite already built; the packaging is what is
            # tested here, and an opt build took 147 s of the suite's 25-minute aim.
            out = self.run_ok([BUILD_DEB, "--fastbuild", "--out", out_dir], timeout=3600, cwd=REPO)
            lines = out.strip().splitlines()
            host = [l for l in lines if os.path.basename(l).startswith("plimsoll_")]
            guest = [l for l in lines if os.path.basename(l).startswith("plimsoll-agent_")]
            self.assertEqual(len(host), 1, out)
            self.assertLessEqual(len(guest), 1, out)
            DebPackage._built = (host[0], guest[0] if guest else None)
            print("\n  tools/build_deb.sh: %s in %.0fs" % (
                ", ".join(os.path.basename(d) for d in DebPackage._built if d), time.monotonic() - t0))
        return DebPackage._built[0], DebPackage._built[1], True

    def get_deb(self):
        host, _, built_here = self.get_debs()
        return host, built_here

    @staticmethod
    def agent_target_exists():
        agent_build = os.path.join(REPO, "agent", "BUILD.bazel")
        if not os.path.exists(agent_build):
            return False
        with open(agent_build) as f:
            return 'name = "plimsoll-agent"' in f.read()

    def contents(self, deb):
        """{path: (mode, owner)} of a .deb."""
        entries = {}
        for line in self.run_ok(["dpkg-deb", "--contents", deb]).splitlines():
            parts = line.split()
            entries[parts[5].lstrip(".")] = (parts[0], parts[1])
        return entries

    def test_build_install_check_remove(self):
        deb, built_here = self.get_deb()
        self.assertTrue(os.path.isfile(deb), deb)
        self.assertRegex(os.path.basename(deb), r"^plimsoll_[0-9][A-Za-z0-9.+~]*_amd64\.deb$")
        info = self.run_ok(["dpkg-deb", "--info", deb])
        fields = dict(re.findall(r"^ (\S+): (.*)$", info, re.M))
        self.assertEqual(fields["Package"], "plimsoll")
        self.assertEqual(fields["Architecture"], "amd64")
        depends = [d.strip().split(" ")[0] for d in fields["Depends"].split(",")]
        for lib in ("libgrpc++1.51", "libprotobuf32", "libvirt0", "libprometheus-cpp-core1.0",
                    "libprometheus-cpp-pull1.0", "libabsl20220623", "libc6", "libstdc++6"):
            self.assertIn(lib, depends)
        ctrl = os.path.join(self.tmp, "ctrl")
        self.run_ok(["dpkg-deb", "--control", deb, ctrl])
        with open(os.path.join(ctrl, "conffiles")) as f:
            conffiles = f.read().split()
        self.assertIn("/etc/plimsoll/plimsolld.textproto", conffiles)
        self.assertIn("/etc/default/plimsolld", conffiles)
        self.assertIn("/etc/plimsoll/placement.conf", conffiles)

        listing = self.run_ok(["dpkg-deb", "--contents", deb])
        entries = {}
        for line in listing.splitlines():
            parts = line.split()
            entries[parts[5].lstrip(".")] = (parts[0], parts[1])
        for path in ("/usr/bin/plimsolld", "/usr/bin/plimsollctl",
                     "/usr/lib/plimsoll-placement/plimsoll-placement"):
            self.assertEqual(entries.get(path, ("?",))[0], "-rwxr-xr-x", path)
        # plimsoll-placement (docs/placement.md): its command, code, generated stubs, unit, config.
        self.assertEqual(entries.get("/usr/bin/plimsoll-placement", ("?",))[0][0], "l")
        for module in ("main", "config", "sync", "placement_api", "line_source", "inventory", "metrics"):
            path = "/usr/lib/plimsoll-placement/plimsoll_placement/%s.py" % module
            self.assertEqual(entries.get(path, ("?",))[0], "-rw-r--r--", path)
        self.assertFalse([p for p in entries if p.endswith("_test.py")], "unit tests are not shipped")
        self.assertTrue([p for p in entries if p.startswith("/usr/lib/plimsoll-placement/gen/")
                         and p.endswith("_pb2_grpc.py")], "the gRPC stubs are generated into the package")
        for path in ("/lib/systemd/system/plimsolld.service", "/etc/plimsoll/plimsolld.textproto",
                     "/etc/default/plimsolld", "/usr/share/doc/plimsoll/README.md",
                     "/usr/share/doc/plimsoll/grafana/plimsoll-dashboard.json",
                     "/usr/share/doc/plimsoll/prometheus/alerts.yml",
                     "/usr/share/doc/plimsoll/prometheus/fleet_rules.yml",
                     "/usr/share/doc/plimsoll/prometheus/prometheus.yml",
                     "/lib/systemd/system/plimsoll-placement.service", "/etc/plimsoll/placement.conf"):
            self.assertEqual(entries.get(path, ("?",))[0], "-rw-r--r--", path)
        for _, owner in entries.values():
            self.assertEqual(owner, "root/root")
        # The agent is the guest package's (test_guest_package_...), not the host's.
        for path in ("/usr/bin/plimsoll-agent", "/lib/systemd/system/plimsoll-agent.service",
                     "/etc/default/plimsoll-agent"):
            self.assertNotIn(path, entries)
        print("\n  %s: %d KiB\n  Depends: %s" % (os.path.basename(deb), os.path.getsize(deb) // 1024,
                                                 fields["Depends"]))

        # Nothing else gets installed: the machine must be left as it was.
        sim = self.run_ok(self.APT + ["install", "-s", deb])
        others = sorted(set(re.findall(r"^Inst (\S+)", sim, re.M)) - {"plimsoll"})
        self.assertFalse(others, "installing the package would also install %s (tools/deps.sh should "
                                 "provide the runtime libraries)" % others)
        self.run_ok(self.APT + ["install", deb])
        self.assertEqual(_dpkg_status("plimsoll"), "install ok installed")
        out = self.run_ok(["/usr/bin/plimsolld", "--check_config", "--config=/etc/plimsoll/plimsolld.textproto"])
        self.assertIn("# effective plimsolld configuration (valid)", out)
        self.assertIn('libvirt_uri: "qemu:///system"', out)
        # The package's flags: dry-run until the operator says otherwise.
        out = self.run_ok(["sh", "-c", ". /etc/default/plimsolld && /usr/bin/plimsolld --check_config "
                                       "--config=/etc/plimsoll/plimsolld.textproto $PLIMSOLLD_ARGS"])
        self.assertIn("dry_run: true", out)
        # The packaged agent path is virtio-serial; the token-checked TCP listener is opt-in.
        self.assertIn('agent_listen: ""', out)
        self.assertIn('channel_name: "org.plimsoll.agent.0"', out)
        self.assertIn("Usage: plimsollctl", self.run_ok(["/usr/bin/plimsollctl", "--help"]))
        # The packaged placement config is valid as shipped, and the command runs from /usr/bin.
        out = self.run_ok(["/usr/bin/plimsoll-placement", "--config=/etc/plimsoll/placement.conf",
                           "--check_config"])
        self.assertIn("unix:/run/plimsoll/plimsolld.sock", out)
        if shutil.which("systemd-analyze"):
            self.run_ok(["systemd-analyze", "verify", "/lib/systemd/system/plimsolld.service"])
            self.run_ok(["systemd-analyze", "verify", "/lib/systemd/system/plimsoll-placement.service"])

        self.run_ok(self.APT + ["remove", "plimsoll"])
        self.assertFalse(os.path.exists("/usr/bin/plimsolld"))
        self.assertFalse(os.path.exists("/lib/systemd/system/plimsolld.service"))
        # Debian keeps an operator's configuration on remove; purge deletes it.
        self.assertEqual(_dpkg_status("plimsoll"), "deinstall ok config-files")
        self.assertTrue(os.path.exists("/etc/plimsoll/plimsolld.textproto"))
        self.run_ok(self.APT + ["purge", "plimsoll"])
        self.assertFalse(os.path.exists("/etc/plimsoll"))
        self.assertFalse(os.path.exists("/etc/default/plimsolld"))
        self.assertIn(_dpkg_status("plimsoll"), ("", "unknown ok not-installed"))

    def test_guest_package_install_check_remove(self):
        host, guest, built_here = self.get_debs()
        if guest is None:
            if built_here:
                self.assertFalse(self.agent_target_exists(), "no guest package although //agent:plimsoll-agent exists")
            self.skipTest("no guest package: //agent:plimsoll-agent does not exist (or $PLIMSOLL_AGENT_DEB unset)")
        self.assertRegex(os.path.basename(guest), r"^plimsoll-agent_[0-9][A-Za-z0-9.+~]*_amd64\.deb$")
        info = self.run_ok(["dpkg-deb", "--info", guest])
        fields = dict(re.findall(r"^ (\S+): (.*)$", info, re.M))
        self.assertEqual(fields["Package"], "plimsoll-agent")
        depends = [d.strip().split(" ")[0] for d in fields["Depends"].split(",")]
        for lib in ("libgrpc++1.51", "libprotobuf32", "libabsl20220623", "libc6"):
            self.assertIn(lib, depends)
        # A guest needs none of the host's libraries.
        for lib in ("libvirt0", "libprometheus-cpp-core1.0", "libprometheus-cpp-pull1.0"):
            self.assertNotIn(lib, depends)
        ctrl = os.path.join(self.tmp, "guest-ctrl")
        self.run_ok(["dpkg-deb", "--control", guest, ctrl])
        with open(os.path.join(ctrl, "conffiles")) as f:
            self.assertEqual(f.read().split(), ["/etc/default/plimsoll-agent"])
        entries = self.contents(guest)
        self.assertEqual(entries.get("/usr/bin/plimsoll-agent", ("?",))[0], "-rwxr-xr-x")
        for path in ("/lib/systemd/system/plimsoll-agent.service", "/lib/udev/rules.d/60-plimsoll-agent.rules",
                     "/etc/default/plimsoll-agent", "/usr/share/doc/plimsoll-agent/agent.md"):
            self.assertEqual(entries.get(path, ("?",))[0], "-rw-r--r--", path)
        for _, owner in entries.values():
            self.assertEqual(owner, "root/root")
        # Nothing of the host's.
        self.assertFalse([p for p in entries if "plimsolld" in p or "plimsollctl" in p], sorted(entries))
        print("\n  %s: %d KiB\n  Depends: %s" % (os.path.basename(guest), os.path.getsize(guest) // 1024,
                                                 fields["Depends"]))

        # udev and systemd start it; a guest without them can still run it by hand.
        self.assertEqual(fields.get("Recommends"), "systemd, udev")
        # Installs on its own (its Depends are all here, nothing else pulled in; dpkg -i installs
        # no Recommends), and next to the host package (no file of one is the other's).
        sim = self.run_ok(self.APT + ["install", "-s", "--no-install-recommends", guest])
        others = sorted(set(re.findall(r"^Inst (\S+)", sim, re.M)) - {"plimsoll-agent"})
        self.assertFalse(others, "installing the guest package would also install %s" % others)
        self.run_ok(["dpkg", "-i", guest])
        self.assertEqual(_dpkg_status("plimsoll-agent"), "install ok installed")
        self.run_ok(["dpkg", "-i", host])
        self.assertEqual(_dpkg_status("plimsoll"), "install ok installed")

        self.assertTrue(os.access("/usr/bin/plimsoll-agent", os.X_OK))
        help_out = subprocess.run(["/usr/bin/plimsoll-agent", "--helpfull"], capture_output=True, text=True,
                                  timeout=30)
        self.assertIn("--server", help_out.stdout + help_out.stderr)
        # The udev rule starts the unit the package ships, on the port the agent opens by default.
        with open("/lib/udev/rules.d/60-plimsoll-agent.rules") as f:
            rules = [l for l in f.read().splitlines() if l.strip() and not l.startswith("#")]
        self.assertEqual(len(rules), 1, rules)
        rule = rules[0]
        self.assertIn('SUBSYSTEM=="virtio-ports"', rule)
        self.assertIn('ATTR{name}=="%s"' % harness.labmod.AGENT_CHANNEL_NAME, rule)
        self.assertIn('TAG+="systemd"', rule)
        wanted = re.search(r'ENV\{SYSTEMD_WANTS\}\+?="([^"]+)"', rule)
        self.assertIsNotNone(wanted, rule)
        self.assertEqual(wanted.group(1), "plimsoll-agent.service")
        self.assertTrue(os.path.exists("/lib/systemd/system/" + wanted.group(1)))
        with open("/etc/default/plimsoll-agent") as f:
            self.assertRegex(f.read(), r'(?m)^PLIMSOLL_AGENT_ARGS=""$')
        if shutil.which("systemd-analyze"):
            self.run_ok(["systemd-analyze", "verify", "/lib/systemd/system/plimsoll-agent.service"])
        else:
            print("\n  note: systemd-analyze missing, the unit was not verified")

        self.run_ok(["dpkg", "-r", "plimsoll-agent"])
        for path in ("/usr/bin/plimsoll-agent", "/lib/systemd/system/plimsoll-agent.service",
                     "/lib/udev/rules.d/60-plimsoll-agent.rules"):
            self.assertFalse(os.path.exists(path), path)
        self.assertEqual(_dpkg_status("plimsoll-agent"), "deinstall ok config-files")
        self.assertTrue(os.path.exists("/etc/default/plimsoll-agent"))
        self.assertTrue(os.path.exists("/usr/bin/plimsolld"), "removing the guest package touched the host's")
        self.run_ok(["dpkg", "--purge", "plimsoll-agent"])
        self.assertFalse(os.path.exists("/etc/default/plimsoll-agent"))
        self.assertIn(_dpkg_status("plimsoll-agent"), ("", "unknown ok not-installed"))
        self.run_ok(["dpkg", "--purge", "plimsoll"])
        self.assertIn(_dpkg_status("plimsoll"), ("", "unknown ok not-installed"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
