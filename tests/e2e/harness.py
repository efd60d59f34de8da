"""Pieces the end-to-end tests share: plimsolld and plimsollctl as a user runs them,
a real Prometheus server scraping plimsolld, and polling helpers.

Binaries come from bazel-bin (tools/test.sh builds them first).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
import lab as labmod  # noqa: E402

BIN = os.path.realpath(os.path.join(REPO, "bazel-bin"))
# bazel-bin follows the last build's configuration: after a `-c opt` build (the simulator, a
# benchmark) it points at k8-opt, whose plimsolld may be an old one. Say so rather than test it.
if os.path.basename(os.path.dirname(BIN)) != "k8-fastbuild":
    sys.stderr.write("harness: bazel-bin is %s, not the fastbuild output tools/test.sh builds: its binaries "
                     "may be stale (rebuild them without -c opt)\n" % BIN)
PLIMSOLLD = os.path.join(BIN, "server", "plimsolld")
PLIMSOLLCTL = os.path.join(BIN, "ctl", "plimsollctl")
WORKLOAD = os.path.join(BIN, "tests", "lab", "guest_workload")
AGENT = os.path.join(BIN, "agent", "plimsoll-agent")
AGENT_TOKEN = os.path.join(BIN, "server", "agent", "plimsoll-agent-token")
RUN_AGENT = os.path.join(REPO, "tests", "lab", "run_agent.sh")
MIB = 1024 * 1024


def skip_reason():
    """Why real-guest tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "real-guest e2e tests need root (private libvirtd in a mount namespace)"
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
    for b in (PLIMSOLLD, PLIMSOLLCTL, WORKLOAD, AGENT, AGENT_TOKEN):
        if not os.path.exists(b):
            return "%s is not built (run tools/test.sh, which builds it)" % b
    return labmod.preflight_problem()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(text, name, **labels):
    """The value of one series in a /metrics text, or None."""
    want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        got = ",".join(sorted((m.group(3) or "").split(","))) if m.group(3) else ""
        if got == want:
            return float(m.group(4))
    return None


def agent_reporting(daemon, name):
    """The guest `name` as plimsolld shows it when its agent is connected, fresh and its PSI
    arrived (agent data, not libvirt's); otherwise a falsy value."""
    g = daemon.guests()[0][name]
    a = g.get("agent", {})
    return a.get("connected") and a.get("fresh") and "psi_some_avg10" in g["stats"] and g


def wait_for(what, predicate, timeout, interval=0.5):
    """Polls predicate() until it returns a truthy value; raises AssertionError with `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # a transient failure while polling is just "not yet"
            last = e
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s (last: %r)" % (timeout, what, last))


def wait_still(what, read, timeout=30, settle=1.0, interval=0.25):
    """Waits until read() has returned the same value for `settle` seconds, and returns it: for
    "let it land" moments (a balloon still moving towards a target set before a daemon stopped)
    without guessing how long the landing takes."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(interval)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
        elif time.monotonic() - since >= settle:
            return value
    raise AssertionError("timed out after %ss waiting for %s to stop changing (last: %r)" % (timeout, what, value))


def wait_ticks(daemon, n, timeout=30):
    """Waits until plimsolld has run `n` more ticks: a window of n decisions, whatever the pace."""
    start = int(daemon.guests()[1].get("tick", 0))
    wait_for("%d more ticks after tick %d" % (n, start),
             lambda: int(daemon.guests()[1].get("tick", 0)) >= start + n, timeout, 0.2)


def wait_heartbeats(lab, names, timeout=20):
    """Waits for a heartbeat from each guest newer than the ones it has sent so far."""
    seen = {n: len(lab.heartbeats(n)) for n in names}
    wait_for("a new heartbeat from %s" % ",".join(names),
             lambda: all(len(lab.heartbeats(n)) > seen[n] for n in names), timeout, 0.2)


def channel_agent(interval="1s", extra_args=(), kill_file=None, stop_file=None):
    """add_guest() arguments that run plimsoll-agent over the guest's own virtio-serial port
    (labmod.AGENT_CHANNEL_NAME): no network, no token; the domain is the identity."""
    cmd = ["plimsoll.agent_bin=" + os.path.realpath(AGENT),
           "plimsoll.agent_server=virtio-serial:" + labmod.AGENT_CHANNEL_NAME, "plimsoll.agent_interval=" + interval]
    if extra_args:
        cmd.append("plimsoll.agent_args=" + ",".join(extra_args))
    if kill_file:
        cmd.append("plimsoll.agent_kill_file=" + kill_file)
    if stop_file:
        cmd.append("plimsoll.agent_stop_file=" + stop_file)
    return dict(run=RUN_AGENT, cmdline_extra=" ".join(cmd))


class AgentKeys:
    """The agent channel's host key and port for one test run, fixed before guests boot so
    each guest's token can go on its kernel command line (the lab's stand-in for fw_cfg)."""

    def __init__(self, workdir):
        self.port = free_port()
        self.host_key = os.path.join(workdir, "agent-host.key")
        if not os.path.exists(self.host_key):
            subprocess.run([AGENT_TOKEN, "--key_file=" + self.host_key, "--generate_key"], check=True,
                           capture_output=True)

    def token(self, guest_uuid):
        out = subprocess.run([AGENT_TOKEN, "--key_file=" + self.host_key, "--uuid=" + guest_uuid],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def guest_kwargs(self, guest_uuid=None, interval="1s", token=None, extra_args=(), stop_file=None):
        """add_guest() arguments that run plimsoll-agent in the guest, reporting every interval."""
        guest_uuid = guest_uuid or str(uuid.uuid4())
        cmd = ["plimsoll.agent_bin=" + os.path.realpath(AGENT), "plimsoll.agent_port=%d" % self.port,
               "plimsoll.agent_interval=" + interval, "plimsoll.token=" + (token or self.token(guest_uuid))]
        if extra_args:
            cmd.append("plimsoll.agent_args=" + ",".join(extra_args))
        if stop_file:
            cmd.append("plimsoll.agent_stop_file=" + stop_file)
        return dict(guest_uuid=guest_uuid, run=RUN_AGENT, cmdline_extra=" ".join(cmd))


class Daemon:
    """plimsolld started as a process with flags, its log in a file."""

    def __init__(self, workdir, uri, agent_keys=None, mount_ns_pid=None, **flags):
        """mount_ns_pid: run plimsolld in that process's mount namespace (the lab's libvirtd),
        where the paths libvirt chooses for channel sockets exist, as on a real host."""
        self.workdir = workdir
        self.socket = os.path.join(workdir, "plimsolld.sock")
        self.metrics_port = free_port()
        self.log_path = os.path.join(workdir, "plimsolld-%d.log" % int(time.time() * 1000))
        keys = agent_keys or AgentKeys(workdir)
        self.agent_port = keys.port
        self.host_key = keys.host_key
        args = [PLIMSOLLD, "--libvirt_uri=" + uri, "--grpc_listen=unix:" + self.socket,
                "--metrics_listen=127.0.0.1:%d" % self.metrics_port,
                "--agent_listen=127.0.0.1:%d" % self.agent_port, "--agent_host_key_file=" + self.host_key]
        # The control state (overrides, the host policy set with `plimsollctl host set`) is kept
        # in the workdir, not in /var/lib/plimsoll where every test run would inherit the last
        # one's budget (a lab run's `host set --budget` did: test_balloon_e2e then saw 1311 MiB).
        if "control.state_file" not in flags and "state_file" not in flags:
            args.append("--control.state_file=" + os.path.join(workdir, "control-state.textproto"))
        args += ["--%s=%s" % (k, v) for k, v in flags.items()]
        if mount_ns_pid is not None:
            args = ["nsenter", "-t", str(mount_ns_pid), "-m", "--"] + args
        self.args = args
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("plimsolld socket", lambda: os.path.exists(self.socket) or self._died(), 15, 0.1)
        if self.proc.poll() is not None:
            raise AssertionError("plimsolld exited %s:\n%s" % (self.proc.returncode, self.read_log()))

    def _died(self):
        return self.proc.poll() is not None

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def ctl(self, *args):
        out = subprocess.run([PLIMSOLLCTL, "--server=unix:" + self.socket] + list(args),
                             capture_output=True, text=True, timeout=20)
        if out.returncode != 0:
            raise RuntimeError("plimsollctl %s failed (%d): %s" % (args, out.returncode, out.stderr))
        return out.stdout

    def guests(self):
        """ListGuests as JSON: {name: guest dict} plus the host block."""
        view = json.loads(self.ctl("guests", "--json"))
        return {g["name"]: g for g in view.get("guests", [])}, view.get("host", {})

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=5) as r:
            return r.read().decode()

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class Prometheus:
    """A real Prometheus server (Debian's package) on loopback scraping one target every second."""

    def __init__(self, workdir, target_port):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="prom-", dir=workdir)
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: plimsolld\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % target_port)
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for("prometheus ready", self._ready, 30)

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("prometheus exited %s" % self.proc.returncode)
        with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port, timeout=2) as r:
            return r.status == 200

    def wait_scrapes(self, n, timeout=30):
        """Waits until Prometheus has scraped plimsolld `n` more times."""
        def scrapes():
            r = self.query('count_over_time(up{job="plimsolld"}[1h])')
            return int(r[0][1]) if r else 0
        start = scrapes()
        wait_for("%d more scrapes" % n, lambda: scrapes() >= start + n, timeout, 0.2)

    def query(self, promql):
        """Instant query; returns [(labels dict, float value)]."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": promql}))
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read().decode())
        if body.get("status") != "success":
            raise AssertionError("query %s failed: %s" % (promql, body))
        return [(s["metric"], float(s["value"][1])) for s in body["data"]["result"]]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()
