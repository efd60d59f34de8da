#!/usr/bin/python3
"""End-to-end tests of the real-guest lab (tests/lab/lab.py) with real TCG guests.

Run as root from the repository:  /usr/bin/python3 tests/lab/lab_test.py -v
Needs the guest workload binary (built here with Bazel if it is missing). Skips itself
when not root or when QEMU/libvirtd are not installed. Prints per-step timings.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import lab as labmod  # noqa: E402

MIB = 1024  # KiB per MiB


def _skip_reason():
    if os.geteuid() != 0:
        return "real-guest lab needs root (private libvirtd in a mount namespace)"
    if labmod.shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
    return labmod.preflight_problem()


def _ensure_workload_bin():
    if os.path.exists(labmod.DEFAULT_WORKLOAD_BIN):
        return os.path.realpath(labmod.DEFAULT_WORKLOAD_BIN)
    cmd = ". tools/bazel_env.sh && bazel build //tests/lab:guest_workload"
    subprocess.run(["bash", "-c", cmd], cwd=labmod.REPO_ROOT, check=True)
    return os.path.realpath(labmod.DEFAULT_WORKLOAD_BIN)


class Steps:
    """Prints how long each step of a scenario took."""

    def __init__(self, title):
        self.title = title
        self.t0 = self.last = time.monotonic()

    def __call__(self, what):
        now = time.monotonic()
        sys.stderr.write("  [%s] %-55s %6.2fs (total %6.2fs)\n" % (
            self.title, what, now - self.last, now - self.t0))
        sys.stderr.flush()
        self.last = now


def _wait_for(pred, timeout, interval=0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            return value
        time.sleep(interval)


SKIP = _skip_reason()


@unittest.skipIf(SKIP, SKIP or "")
class RealGuestLabTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.workload_bin = _ensure_workload_bin()
        t0 = time.monotonic()
        labmod.prepare(os.environ.get("PLIMSOLL_LAB_CACHE", labmod.DEFAULT_CACHE_DIR))
        sys.stderr.write("  prepare (artefacts + capability cache): %.2fs\n"
                         % (time.monotonic() - t0))

    def _new_lab(self):
        lab = labmod.Lab(workload_bin=self.workload_bin)
        self.addCleanup(lambda: os.path.isdir(lab.state_dir) and lab.stop())
        return lab

    def test_two_guests_stream_balloon_destroy_stop(self):
        step = Steps("two-guests")
        lab = self._new_lab()
        lab.start()
        step("start private libvirtd")
        self.assertTrue(lab.uri.startswith("qemu:///system?socket=" + lab.state_dir))
        self.assertIsNotNone(lab.libvirtd_pid())

        lab.add_guest("stream1", workload="stream", memory_mib=1024)
        lab.add_guest("idle1", workload="idle", memory_mib=1024)
        step("virsh create stream1 + idle1")
        lab.wait_ready("stream1", timeout=60)
        lab.wait_ready("idle1", timeout=60)
        step("both guests heartbeat, dommemstat has usable")

        for name in ("stream1", "idle1"):
            hb = lab.heartbeat(name)
            for key in labmod.HEARTBEAT_KEYS:
                self.assertIn(key, hb)
            self.assertGreater(hb["memtotal_kb"], 800 * MIB)
            self.assertEqual(hb["oom_kill"], 0)
            ms = lab.dommemstat(name)
            for key in ("actual", "usable", "disk_caches", "unused", "available", "rss"):
                self.assertIn(key, ms, "%s dommemstat %r" % (name, ms))
            self.assertEqual(ms["actual"], 1024 * MIB)

        cached = _wait_for(lambda: lab.heartbeat("stream1")["cached_kb"] > 300 * MIB, 60)
        self.assertTrue(cached, "stream1 page cache stayed at %d KiB; console tail:\n%s" % (
            lab.heartbeat("stream1")["cached_kb"], lab.console("stream1")[-2000:]))
        step("stream1 cached_kb > 300 MiB (%d MiB)"
             % (lab.heartbeat("stream1")["cached_kb"] // MIB))
        self.assertTrue(_wait_for(lambda: lab.dommemstat("stream1")["disk_caches"] > 300 * MIB,
                                  10))

        t0 = time.monotonic()
        lab.virsh("setmem", "stream1", "400M", "--live")
        took_call = time.monotonic() - t0
        took = lab.wait_actual("stream1", 400, tolerance=0.05, timeout=30)
        step("setmem 400M: call %.3fs, actual within 5%% after %.2fs" % (took_call, took))
        beat = lab.heartbeat("stream1")
        self.assertEqual(beat["oom_kill"], 0)

        lab.virsh("setmem", "stream1", "1024M", "--live")
        took = lab.wait_actual("stream1", 1024, tolerance=0.05, timeout=30)
        step("setmem back to 1024M: %.2fs" % took)
        # The guest saw the balloon move.
        self.assertTrue(_wait_for(lambda: lab.heartbeat("stream1")["balloon_inflate"] > 0, 10))

        lab.destroy("idle1")
        self.assertNotIn("idle1", lab.domains())
        self.assertIn("stream1", lab.domains())
        before = lab.heartbeat("stream1")["uptime"]
        self.assertTrue(_wait_for(lambda: lab.heartbeat("stream1")["uptime"] > before, 10),
                        "stream1 stopped heartbeating after idle1 was destroyed")
        step("destroy idle1; stream1 still heartbeats")
        self.assertGreater(len(lab.workload_lines("stream1")), 0)
        mbps = [l["mbps"] for l in lab.workload_lines("stream1") if "mbps" in l]
        sys.stderr.write("  stream1 throughput lines (MB/s): %s\n" % mbps)

        state = lab.state_dir
        pid = lab.libvirtd_pid()
        self.assertEqual(len(labmod.lab_qemu_pids(state)), 1)
        lab.stop()
        step("stop()")
        self.assertEqual(labmod.lab_qemu_pids(state), [])
        self.assertFalse(labmod._proc_alive(pid), "libvirtd %d still alive" % pid)
        self.assertFalse(os.path.exists(state))

    def test_anon_workload_allocates(self):
        step = Steps("anon")
        lab = self._new_lab()
        lab.start()
        lab.add_guest("anon1", workload="anon", memory_mib=1024, anon_mib=300, anon_after=4)
        lab.wait_ready("anon1", timeout=60)
        step("anon1 ready")
        base = lab.heartbeat("anon1")["anon_kb"]
        done = _wait_for(lambda: any(l.get("allocated_mib") == 300
                                     for l in lab.workload_lines("anon1")), 30)
        self.assertTrue(done, "no allocation line; console tail:\n" + lab.console("anon1")[-2000:])
        step("workload reports allocated_mib=300")
        grown = _wait_for(lambda: lab.heartbeat("anon1")["anon_kb"] - base >= 290 * MIB, 10)
        self.assertTrue(grown, "anon_kb %d -> %d" % (base, lab.heartbeat("anon1")["anon_kb"]))
        step("heartbeat anon_kb %d -> %d MiB" % (base // MIB,
                                                 lab.heartbeat("anon1")["anon_kb"] // MIB))
        state = lab.state_dir
        lab.stop()
        step("stop()")
        self.assertEqual(labmod.lab_qemu_pids(state), [])

    def test_two_labs_do_not_collide_and_run_reaches_host(self):
        """Two labs side by side; each guest's run= program reaches a host socket."""
        step = Steps("two-labs")
        received = []
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.settimeout(60)
        self.addCleanup(server.close)
        port = server.getsockname()[1]

        def serve():
            for _ in range(2):
                try:
                    conn, peer = server.accept()
                except OSError:
                    return
                with conn:
                    conn.settimeout(30)
                    data = b""
                    while b"\n" not in data:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    received.append((peer[0], data.decode(errors="replace").strip()))
        thread = threading.Thread(target=serve, daemon=True)
        thread.start()

        scratch = tempfile.mkdtemp(prefix="plimsoll-lab-test-")
        self.addCleanup(shutil.rmtree, scratch, True)
        script = os.path.join(scratch, "hello.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n"
                    "port=$(tr ' ' '\\n' </proc/cmdline | sed -n 's/^plimsoll.test_port=//p')\n"
                    "printf 'hello uuid=%s\\n' \"$(cat /sys/class/dmi/id/product_uuid)\" |"
                    " /bin/busybox nc 10.0.2.2 \"$port\"\n"
                    "echo PLIMSOLL-RUN done rc=$?\n")
        os.chmod(script, 0o755)

        a, b = self._new_lab(), self._new_lab()
        a.start()
        b.start()
        step("two libvirtds started")
        self.assertNotEqual(a.uri, b.uri)
        self.assertNotEqual(a.libvirtd_pid(), b.libvirtd_pid())
        extra = "plimsoll.test_port=%d" % port
        a.add_guest("same-name", run=script, cmdline_extra=extra, memory_mib=512)
        b.add_guest("same-name", run=script, cmdline_extra=extra, memory_mib=512)
        a.wait_ready("same-name")
        b.wait_ready("same-name")
        step("a guest of the same name in each lab")
        thread.join(30)
        uuids = sorted(x.virsh("domuuid", "same-name").strip() for x in (a, b))
        self.assertEqual(sorted(received), sorted(("127.0.0.1", "hello uuid=" + u) for u in uuids),
                         "consoles:\n%s\n%s" % (a.console("same-name")[-1500:],
                                                 b.console("same-name")[-1500:]))
        step("run= programs reached 127.0.0.1:%d from both guests" % port)
        a.stop()
        step("stop lab a")
        self.assertIsNotNone(b.libvirtd_pid())
        self.assertEqual(b.domains(), ["same-name"])
        self.assertEqual(len(labmod.lab_qemu_pids(b.state_dir)), 1)
        b.stop()
        step("stop lab b")


class ParserTest(unittest.TestCase):
    """Runs anywhere: the console and virsh parsers."""

    def test_heartbeat_parsing_skips_partial_lines(self):
        text = ("noise\r\n"
                "PLIMSOLL-HB uptime=2.5 memtotal_kb=1 memfree_kb=2 memavail_kb=3 cached_kb=4 "
                "active_file_kb=5 inactive_file_kb=6 anon_kb=7 oom_kill=0 balloon_inflate=-1 "
                "balloon_deflate=9 workingset_refault_file=10 pgmajfault=11\r\n"
                "PLIMSOLL-HB uptime=4.5 memtotal_kb=1 memfree\n")
        beats = labmod.parse_heartbeats(text)
        self.assertEqual(len(beats), 1)
        self.assertEqual(beats[0]["uptime"], 2.5)
        self.assertEqual(beats[0]["balloon_inflate"], -1)
        self.assertEqual(beats[0]["pgmajfault"], 11)

    def test_dommemstat_parsing(self):
        ms = labmod.parse_dommemstat("actual 1048576\nlast_update 0\nrss 2048\n\n")
        self.assertEqual(ms, {"actual": 1048576, "last_update": 0, "rss": 2048})

    def test_workload_lines(self):
        lines = labmod.parse_workload_lines(
            "PLIMSOLL-WL mode=stream t=5.0 mbps=812.5\r\nPLIMSOLL-WL mode=anon allocated_mib=64 t=1.0\n")
        self.assertEqual(lines[0]["mbps"], 812.5)
        self.assertEqual(lines[1]["allocated_mib"], 64)


if __name__ == "__main__":
    unittest.main()
