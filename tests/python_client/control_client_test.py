#!/usr/bin/python3
"""A control plane's view of plimsolld: a Python gRPC client, generated at test
time from the protos with protoc and Debian's grpc_python_plugin, drives the
Control API of a real plimsolld on libvirt's test driver over a unix socket.

Runs with Debian's python3-grpcio and python3-protobuf (/usr/bin/python3):

  /usr/bin/python3 tests/python_client/control_client_test.py \
      --plimsolld=bazel-bin/server/plimsolld --proto_root=proto

Under Bazel (tests/python_client:control_client_test) the paths come from the
runfiles. Tests of calls that change things fail if the daemon answers
UNIMPLEMENTED: plimsolld has its control core wired.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

ARGS = None


def runfile(rel):
    srcdir, ws = os.environ.get("TEST_SRCDIR"), os.environ.get("TEST_WORKSPACE")
    return os.path.join(srcdir, ws, rel) if srcdir and ws else rel


def generate_stubs(out_dir, proto_root, extra_root):
    """protoc --python_out + --grpc_out with /usr/bin/grpc_python_plugin."""
    protos = [os.path.join(proto_root, "plimsoll/v1", f) for f in ("types.proto", "control.proto")]
    extras = [os.path.join(extra_root, "grpc_std", f) for f in ("health.proto", "reflection.proto")]
    for root, files in ((proto_root, protos), (extra_root, extras)):
        cmd = ["/usr/bin/protoc", "-I" + root, "--python_out=" + out_dir, "--grpc_out=" + out_dir,
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin"] + files
        subprocess.run(cmd, check=True)
    sys.path.insert(0, out_dir)


class Daemon:
    """plimsolld on libvirt's test driver, its control API on a private unix socket."""

    def __init__(self, binary, work):
        self.binary, self.work = binary, work
        self.socket = os.path.join(work, "plimsolld.sock")
        self.state_file = os.path.join(work, "control-state.textproto")
        self.proc = None
        self.log_path = os.path.join(work, "plimsolld.log")
        proc_root = os.path.join(work, "procroot")
        os.makedirs(os.path.join(proc_root, "proc/pressure"), exist_ok=True)
        with open(os.path.join(proc_root, "proc/meminfo"), "w") as f:
            f.write("MemTotal:       16777216 kB\nMemFree:         8388608 kB\n"
                    "MemAvailable:   12582912 kB\nBuffers:          102400 kB\n"
                    "Cached:          2097152 kB\n")
        with open(os.path.join(proc_root, "proc/pressure/memory"), "w") as f:
            f.write("some avg10=1.50 avg60=0.50 avg300=0.10 total=12345\n"
                    "full avg10=0.25 avg60=0.00 avg300=0.00 total=99\n")
        self.args = ["--libvirt_uri=test:///default", "--grpc_listen=unix:" + self.socket,
                     "--metrics_listen=", "--tick=200ms", "--proc_root=" + proc_root,
                     "--policy=mom",  # what test_host_status expects, whatever the default is
                     "--guest_memory_budget_bytes=%d" % (4 << 30)]
        # Fields that exist only in newer daemons: keep everything inside `work`.
        help_text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
        # tests/python_client:fake_plimsolld serves the API over a fake core: nothing acts on a change.
        self.has_control_loop = not help_text.startswith("fake_plimsolld")
        if "agent_listen" in help_text:
            self.args += ["--agent_listen=", "--agent_host_key_file=" + os.path.join(work, "agent.key")]
        if "state_file" in help_text:
            self.args.append("--state_file=" + self.state_file)

    def start(self):
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen([self.binary] + self.args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("plimsolld exited with %s:\n%s" % (self.proc.returncode, self.tail()))
            if os.path.exists(self.socket):
                return
            time.sleep(0.05)
        raise RuntimeError("plimsolld did not create its socket:\n" + self.tail())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        self.proc = None

    def tail(self):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-20:])


class ControlClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="plimsoll-py-", dir="/tmp")  # short: socket path limit
        gen = os.path.join(cls.work, "gen")
        os.makedirs(gen)
        generate_stubs(gen, ARGS.proto_root, ARGS.extra_proto_root)
        global grpc, control_pb2, control_pb2_grpc, types_pb2, health_pb2, health_pb2_grpc
        global reflection_pb2, reflection_pb2_grpc, descriptor_pb2
        import grpc
        from google.protobuf import descriptor_pb2
        from plimsoll.v1 import control_pb2, control_pb2_grpc, types_pb2
        from grpc_std import health_pb2, health_pb2_grpc, reflection_pb2, reflection_pb2_grpc
        cls.daemon = Daemon(ARGS.plimsolld, cls.work)
        cls.daemon.start()
        cls.connect()
        # Wait for the first ticks to publish the guests.
        deadline = time.time() + 20
        while time.time() < deadline:
            if cls.stub.ListGuests(control_pb2.ListGuestsRequest(), timeout=5).host.tick >= 2:
                break
            time.sleep(0.1)

    @classmethod
    def connect(cls):
        cls.channel = grpc.insecure_channel("unix:" + cls.daemon.socket)
        cls.stub = control_pb2_grpc.ControlStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.daemon.stop()
        shutil.rmtree(cls.work, ignore_errors=True)

    # -- helpers --

    def call(self, method, request):
        return getattr(self.stub, method)(request, timeout=10)

    def expect_error(self, code, fn, *args):
        with self.assertRaises(grpc.RpcError) as cm:
            fn(*args)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        return cm.exception.details()

    def mutate_or_skip(self, method, request):
        """Calls a mutating RPC. plimsolld has its control core wired, so UNIMPLEMENTED is a
        failure (it used to be a skip, before the core was wired, and would now hide a
        regression)."""
        try:
            return self.call(method, request)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                self.fail("plimsolld answers UNIMPLEMENTED for %s: %s" % (method, e.details()))
            raise

    def guest_name(self):
        return self.call("ListGuests", control_pb2.ListGuestsRequest()).guests[0].name

    # -- standard gRPC services --

    def test_health_check_serving(self):
        health = health_pb2_grpc.HealthStub(self.channel)
        r = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        self.assertEqual(r.status, health_pb2.HealthCheckResponse.SERVING)

    def test_reflection_lists_and_describes_the_control_service(self):
        refl = reflection_pb2_grpc.ServerReflectionStub(self.channel)
        requests = [reflection_pb2.ServerReflectionRequest(list_services=""),
                    reflection_pb2.ServerReflectionRequest(file_containing_symbol="plimsoll.v1.Control")]
        responses = list(refl.ServerReflectionInfo(iter(requests), timeout=10))
        names = {s.name for s in responses[0].list_services_response.service}
        self.assertIn("plimsoll.v1.Control", names)
        self.assertIn("grpc.health.v1.Health", names)
        files = [descriptor_pb2.FileDescriptorProto.FromString(b)
                 for b in responses[1].file_descriptor_response.file_descriptor_proto]
        methods = {m.name for f in files for s in f.service if s.name == "Control" for m in s.method}
        self.assertTrue({"ListGuests", "SetGuestPolicy", "Reclaim", "Watch"} <= methods, methods)

    # -- reads --

    def test_list_and_get_guests(self):
        view = self.call("ListGuests", control_pb2.ListGuestsRequest())
        self.assertGreaterEqual(len(view.guests), 1)
        g = view.guests[0]
        self.assertTrue(g.uuid)
        self.assertGreater(g.max_bytes, 0)
        self.assertEqual(g.run_state, types_pb2.GUEST_RUN_STATE_RUNNING)
        self.assertTrue(view.host.libvirt_connected)
        self.assertEqual(view.host.guest_budget_bytes, 4 << 30)
        by_uuid = self.call("GetGuest", control_pb2.GetGuestRequest(guest=g.uuid.upper()))
        self.assertEqual(by_uuid.name, g.name)
        details = self.expect_error(grpc.StatusCode.NOT_FOUND, self.call, "GetGuest",
                                    control_pb2.GetGuestRequest(guest="no-such-guest"))
        self.assertIn("no-such-guest", details)
        details = self.expect_error(grpc.StatusCode.INVALID_ARGUMENT, self.call, "GetGuest",
                                    control_pb2.GetGuestRequest())
        self.assertIn("guest", details)

    def test_host_status(self):
        host = self.call("GetHostStatus", control_pb2.GetHostStatusRequest())
        self.assertEqual(host.mem_total_bytes, 16 << 30)
        self.assertAlmostEqual(host.psi_memory_some_avg10, 1.5)
        self.assertEqual(host.policy, "mom")
        self.assertFalse(host.paused)

    def test_host_line_figures_add_up(self):
        line = self.call("GetHostLine", control_pb2.GetHostLineRequest())
        host = self.call("GetHostStatus", control_pb2.GetHostStatusRequest())
        self.assertGreater(line.tick, 0)
        self.assertEqual(line.capacity_bytes, host.guest_budget_bytes)
        self.assertEqual(line.headroom_bytes,
                         line.capacity_bytes - line.committed_bytes - line.new_guest_room_bytes)
        self.assertEqual(line.over_line, line.committed_bytes > line.capacity_bytes)
        self.assertLessEqual(line.offered_bytes, max(0, line.headroom_bytes))
        if line.stale:
            self.assertEqual(line.offered_bytes, 0)
            self.assertTrue(line.stale_reason)

    def test_watch_starts_with_a_snapshot_of_every_guest(self):
        view = self.call("ListGuests", control_pb2.ListGuestsRequest())
        stream = self.stub.Watch(control_pb2.WatchRequest(initial_snapshot=True), timeout=15)
        seen = []
        for event in stream:
            if event.HasField("snapshot_complete"):
                self.assertEqual(event.snapshot_complete.guests, len(view.guests))
                break
            if event.HasField("host_line"):  # the host's line is part of the snapshot
                self.assertEqual(event.host_line.capacity_bytes, view.host_line.capacity_bytes)
                continue
            self.assertEqual(event.guest.change, types_pb2.GuestEvent.CHANGE_SNAPSHOT)
            seen.append(event.guest.guest.name)
        stream.cancel()
        self.assertEqual(sorted(seen), sorted(g.name for g in view.guests))

    def test_watch_rejects_a_bad_filter(self):
        stream = self.stub.Watch(control_pb2.WatchRequest(kinds=[0]), timeout=10)
        with self.assertRaises(grpc.RpcError) as cm:
            list(stream)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("kinds[0]", cm.exception.details())

    # -- validation (answered before any core is involved) --

    def test_invalid_requests_name_the_field(self):
        name = self.guest_name()
        cases = [
            ("SetGuestPolicy", control_pb2.SetGuestPolicyRequest(
                guest=name, override=types_pb2.GuestOverride(shares=0)), "override.shares"),
            ("SetGuestPolicy", control_pb2.SetGuestPolicyRequest(
                guest=name, override=types_pb2.GuestOverride(pin_bytes=1 << 20)), "override.pin_bytes"),
            ("SetGuestPolicy", control_pb2.SetGuestPolicyRequest(guest=name), "override"),
            ("ClearGuestPolicy", control_pb2.ClearGuestPolicyRequest(guest=name, fields=["pin"]), "fields[0]"),
            ("SetHostPolicy", control_pb2.SetHostPolicyRequest(
                policy=types_pb2.HostPolicy(host_reserve_bytes=-1)), "policy.host_reserve_bytes"),
            ("Reclaim", control_pb2.ReclaimRequest(bytes=0), "bytes"),
            ("Reclaim", control_pb2.ReclaimRequest(bytes=1, hold_seconds=0), "hold_seconds"),
        ]
        for method, request, field in cases:
            details = self.expect_error(grpc.StatusCode.INVALID_ARGUMENT, self.call, method, request)
            self.assertTrue(details.startswith(field + ": ") or details.startswith(field + "["),
                            "%s: %s" % (method, details))

    # -- changes --

    def test_set_get_list_and_clear_a_guest_policy(self):
        name = self.guest_name()
        gib = 1 << 30
        r = self.mutate_or_skip("SetGuestPolicy", control_pb2.SetGuestPolicyRequest(
            guest=name, override=types_pb2.GuestOverride(min_bytes=gib // 2, priority=5, note="python")))
        self.assertEqual(r.override.min_bytes, gib // 2)
        self.assertEqual(r.override.priority, 5)
        self.assertEqual(r.override.updated_by, "unix")
        policies = self.call("ListGuestPolicies", control_pb2.ListGuestPoliciesRequest())
        self.assertIn(name, [o.guest_name for o in policies.overrides])
        deadline = time.time() + 10  # the published view shows it from the next tick
        while time.time() < deadline:
            g = self.call("GetGuest", control_pb2.GetGuestRequest(guest=name))
            if g.HasField("override") and g.override.priority == 5:
                break
            time.sleep(0.1)
        self.assertEqual(g.override.note, "python")
        details = self.expect_error(grpc.StatusCode.NOT_FOUND, self.call, "SetGuestPolicy",
                                    control_pb2.SetGuestPolicyRequest(
                                        guest="no-such-guest", override=types_pb2.GuestOverride(priority=1)))
        self.assertIn("no-such-guest", details)
        cleared = self.call("ClearGuestPolicy", control_pb2.ClearGuestPolicyRequest(guest=name))
        self.assertTrue(cleared.existed)
        again = self.call("ClearGuestPolicy", control_pb2.ClearGuestPolicyRequest(guest=name))
        self.assertFalse(again.existed)

    def test_pin_grows_a_guest_and_watch_reports_it(self):
        if not self.daemon.has_control_loop:
            self.skipTest("fake_plimsolld has no control loop: nothing acts on a pin")
        # The test driver's stats never advance: a pin may grow a guest, never shrink it.
        g = self.call("ListGuests", control_pb2.ListGuestsRequest()).guests[0]
        pin = min(g.max_bytes, g.actual_bytes + (512 << 20))
        stream = self.stub.Watch(control_pb2.WatchRequest(guests=[g.name], kinds=[types_pb2.WATCH_EVENT_KIND_GUEST]),
                                 timeout=15)
        time.sleep(0.3)  # let the stream subscribe
        try:
            self.mutate_or_skip("SetGuestPolicy", control_pb2.SetGuestPolicyRequest(
                guest=g.uuid, override=types_pb2.GuestOverride(pin_bytes=pin)))
            for event in stream:
                if event.guest.guest.management_state == types_pb2.MANAGEMENT_STATE_PINNED:
                    self.assertEqual(event.guest.change, types_pb2.GuestEvent.CHANGE_CHANGED)
                    self.assertIn("PINNED", event.guest.detail)
                    break
        finally:
            stream.cancel()
        deadline = time.time() + 10
        while time.time() < deadline:
            got = self.call("GetGuest", control_pb2.GetGuestRequest(guest=g.name))
            if got.target_bytes == pin:
                break
            time.sleep(0.1)
        self.assertEqual(got.target_bytes, pin)
        self.assertEqual(got.management_state, types_pb2.MANAGEMENT_STATE_PINNED)
        self.assertIn("pinned", got.last_decision.reason)
        self.call("ClearGuestPolicy", control_pb2.ClearGuestPolicyRequest(guest=g.name))

    def test_reclaim_dry_run_returns_a_plan(self):
        r = self.mutate_or_skip("Reclaim", control_pb2.ReclaimRequest(bytes=256 << 20, dry_run=True))
        plan = r.plan
        self.assertTrue(plan.dry_run)
        self.assertFalse(plan.applied)
        self.assertEqual(plan.requested_bytes, 256 << 20)
        self.assertEqual(plan.planned_bytes, sum(i.reclaim_bytes for i in plan.items))
        # Every guest is either in the plan or skipped with a reason.
        names = {i.guest_name for i in plan.items} | {s.guest_name for s in plan.skipped}
        view = self.call("ListGuests", control_pb2.ListGuestsRequest())
        self.assertEqual(names, {g.name for g in view.guests})
        for s in plan.skipped:
            self.assertTrue(s.reason)
        self.assertTrue(plan.summary)

    def test_paused_management_refuses_reclaim_and_watch_sees_it(self):
        stream = self.stub.Watch(control_pb2.WatchRequest(kinds=[types_pb2.WATCH_EVENT_KIND_HOST_POLICY]),
                                 timeout=20)
        time.sleep(0.3)  # let the stream subscribe
        try:
            self.mutate_or_skip("SetHostPolicy", control_pb2.SetHostPolicyRequest(
                policy=types_pb2.HostPolicy(paused=True)))
            details = self.expect_error(grpc.StatusCode.FAILED_PRECONDITION, self.call, "Reclaim",
                                        control_pb2.ReclaimRequest(bytes=256 << 20))
            self.assertIn("paused", details)
            event = next(iter(stream))
            self.assertTrue(event.host_policy.policy.paused)
        finally:
            stream.cancel()
            try:
                self.call("SetHostPolicy", control_pb2.SetHostPolicyRequest(
                    policy=types_pb2.HostPolicy(paused=False)))
            except grpc.RpcError:
                pass

    def test_overrides_survive_a_restart(self):
        name = self.guest_name()
        self.mutate_or_skip("SetGuestPolicy", control_pb2.SetGuestPolicyRequest(
            guest=name, override=types_pb2.GuestOverride(priority=-7)))
        self.channel.close()
        self.daemon.stop()
        self.daemon.start()
        type(self).connect()
        deadline = time.time() + 20
        while True:
            try:
                policies = self.call("ListGuestPolicies", control_pb2.ListGuestPoliciesRequest())
                break
            except grpc.RpcError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        self.assertIn((name, -7), [(o.guest_name, o.priority) for o in policies.overrides])
        self.call("ClearGuestPolicy", control_pb2.ClearGuestPolicyRequest(guest=name))


class JUnitResult(unittest.TextTestResult):
    """Records each case for the JUnit XML Bazel reads ($XML_OUTPUT_FILE)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.cases = []

    def addSuccess(self, test):
        super().addSuccess(test)
        self.cases.append((test, None, None))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.cases.append((test, "failure", self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        super().addError(test, err)
        self.cases.append((test, "error", self._exc_info_to_string(err, test)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.cases.append((test, "skipped", reason))


def write_junit(path, result):
    suite = ET.Element("testsuite", name="python_client", tests=str(len(result.cases)),
                       failures=str(len(result.failures)), errors=str(len(result.errors)),
                       skipped=str(len(result.skipped)))
    for test, kind, text in result.cases:
        case = ET.SubElement(suite, "testcase", classname=type(test).__name__, name=test._testMethodName)
        if kind:
            ET.SubElement(case, kind, message=(text or "")[:200]).text = text
    root = ET.Element("testsuites")
    root.append(suite)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--plimsolld", default=runfile("server/plimsolld"))
    parser.add_argument("--proto_root", default=runfile("proto"))
    parser.add_argument("--extra_proto_root", default=runfile("tests/python_client/protos"))
    ARGS, rest = parser.parse_known_args()
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(ControlClientTest)
    if rest:
        suite = unittest.TestSuite(t for t in suite if t._testMethodName in rest)
    result = unittest.TextTestRunner(resultclass=JUnitResult, verbosity=2).run(suite)
    if os.environ.get("XML_OUTPUT_FILE"):
        write_junit(os.environ["XML_OUTPUT_FILE"], result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
