#!/usr/bin/env python3
"""plimsolld's memory and CPU with many guests: the real binary against libvirt's test driver.

Writes a test-driver host of N running guests (bazel-bin/bench/make_test_node), starts
bazel-bin/server/plimsolld on it with the default policy and the given tick, lets it warm up,
then samples /proc/PID/status (VmRSS, VmHWM, Threads) and /proc/PID/stat (utime + stime) every
--interval seconds for --duration seconds, scrapes /metrics once half way, and prints a table.

The test driver runs inside plimsolld (test:/// is an in-process driver, no libvirtd), so its
domains, XML and stats calls are counted in plimsolld's RSS and CPU: with a real libvirtd
that share is in libvirtd instead.

    bazel build -c opt //server:plimsolld //bench:make_test_node //bench:test_driver_memory
    python3 bench/daemon_footprint.py --guests=1000 --tick=1s --warmup=20 --duration=120

Results: docs/benchmarks.md, "Control loop at scale (libvirt test driver)".
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_status(pid):
    """VmRSS and VmHWM in KiB, and the thread count, from /proc/PID/status."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                out[key] = int(value.split()[0])
    return out


def read_cpu_seconds(pid):
    """utime + stime of the whole process (all threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        text = f.read()
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def read_pss(pid):
    """Pss, Pss_Anon and Pss_File in KiB (file pages shared with other processes count in part)."""
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Pss", "Pss_Anon", "Pss_File"):
                out[key] = int(value.split()[0])
    return out


def read_smaps(pid):
    """What is resident, by kind of mapping, in KiB, from /proc/PID/smaps: file pages of the
    binary and its shared libraries (their code and read-only data: shared with every process
    that maps them, and a floor for this set of libraries), the anonymous (copied-on-write)
    pages inside those mappings (relocated data, .data, .bss), and the anonymous mappings
    (malloc's heap and arenas, thread stacks), the largest one apart."""
    out = {"lib_file": 0, "lib_anon": 0, "anon": 0, "largest_anon": 0}
    name, rss, anon = None, 0, 0

    def flush():
        if name is None:
            return
        if name.startswith("/"):
            out["lib_file"] += rss - anon
            out["lib_anon"] += anon
        else:
            out["anon"] += rss
            out["largest_anon"] = max(out["largest_anon"], rss)

    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            fields = line.split()
            if fields and re.match(r"^[0-9a-f]+-[0-9a-f]+$", fields[0]):
                flush()
                name, rss, anon = (fields[5] if len(fields) > 5 else "[anon]"), 0, 0
            elif fields and fields[0] == "Rss:":
                rss = int(fields[1])
            elif fields and fields[0] == "Anonymous:":
                anon = int(fields[1])
    flush()
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def scrape(port):
    t0 = time.monotonic()
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        body = r.read()
    return body, time.monotonic() - t0


def metric_value(text, name):
    m = re.search(r"^%s(?:\{\})? (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--guests", type=int, default=1000)
    ap.add_argument("--tick", default="1s")
    ap.add_argument("--warmup", type=float, default=20, help="seconds before the first sample")
    ap.add_argument("--duration", type=float, default=120, help="seconds of sampling after the warm-up")
    ap.add_argument("--interval", type=float, default=5, help="seconds between samples")
    ap.add_argument("--scrape_interval", type=float, default=0,
                    help="also scrape /metrics this often, as Prometheus would (0: once, half way)")
    ap.add_argument("--plimsolld", default=os.path.join(ROOT, "bazel-bin/server/plimsolld"))
    ap.add_argument("--make_test_node", default=os.path.join(ROOT, "bazel-bin/bench/make_test_node"))
    ap.add_argument("--test_driver_memory", default=os.path.join(ROOT, "bazel-bin/bench/test_driver_memory"))
    ap.add_argument("--extra", action="append", default=[], help="another plimsolld flag, e.g. --extra=--policy=mom")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (host XML, daemon log)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="plimsoll-footprint-")
    node = os.path.join(work, "node.xml")
    subprocess.run([args.make_test_node, str(args.guests), node], check=True)
    metrics_port = free_port()
    log_path = os.path.join(work, "plimsolld.log")
    cmd = [args.plimsolld, "--libvirt_uri=test://" + node, "--tick=" + args.tick,
           "--grpc_listen=unix:" + os.path.join(work, "plimsolld.sock"),
           "--metrics_listen=127.0.0.1:%d" % metrics_port,
           "--agent_listen=127.0.0.1:%d" % free_port(),
           "--agent_host_key_file=" + os.path.join(work, "agent-host.key")] + args.extra
    print("command: " + " ".join(cmd))
    print("node: %d guests, %d bytes of XML" % (args.guests, os.path.getsize(node)))
    # The test driver's own share, measured in a process that does nothing else.
    driver = subprocess.run([args.test_driver_memory, node], capture_output=True, text=True, check=True).stdout
    fields = dict(kv.split("=") for kv in driver.split())
    driver_kib = int(fields["rss_anon_after_kib"]) - int(fields["rss_anon_before_kib"])
    print("the test driver alone (bench/test_driver_memory): +%.1f MiB RssAnon for the host" % (driver_kib / 1024))
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    rows = []
    try:
        t_start = time.monotonic()
        time.sleep(args.warmup)
        if proc.poll() is not None:
            raise SystemExit("plimsolld exited %s; log: %s" % (proc.returncode, log_path))
        load_before = loadavg()
        t0 = time.monotonic()
        cpu0 = read_cpu_seconds(proc.pid)
        prev_t, prev_cpu = t0, cpu0
        scraped = None
        scrapes = 0
        next_scrape = t0 + args.scrape_interval if args.scrape_interval > 0 else None
        while True:
            st = read_status(proc.pid)
            now = time.monotonic()
            cpu = read_cpu_seconds(proc.pid)
            rows.append({"t": now - t0, "rss": st["VmRSS"], "hwm": st["VmHWM"], "threads": st["Threads"],
                         "anon": st["RssAnon"], "file": st["RssFile"],
                         "cpu": cpu - cpu0,
                         "pct": 100.0 * (cpu - prev_cpu) / (now - prev_t) if now > prev_t else 0.0})
            prev_t, prev_cpu = now, cpu
            if scraped is None and now - t0 >= args.duration / 2:
                scraped = scrape(metrics_port)
                scrapes += 1
            if now - t0 >= args.duration:
                break
            next_sample = t0 + len(rows) * args.interval
            while next_scrape is not None and next_scrape < next_sample:
                time.sleep(max(0.0, next_scrape - time.monotonic()))
                scrape(metrics_port)
                scrapes += 1
                next_scrape += args.scrape_interval
            time.sleep(max(0.0, next_sample - time.monotonic()))
        elapsed = rows[-1]["t"]
        pss = read_pss(proc.pid)
        smaps = read_smaps(proc.pid)
        load_after = loadavg()
        final_text = scrape(metrics_port)[0].decode()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()

    print("\n| t, s | VmRSS, MiB | RssAnon | RssFile | VmHWM, MiB | threads | CPU since start of sampling, s | CPU over the interval, % of one core |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %.0f | %.1f | %.1f | %.1f | %.1f | %d | %.2f | %.2f |" % (
            r["t"], r["rss"] / 1024, r["anon"] / 1024, r["file"] / 1024, r["hwm"] / 1024, r["threads"], r["cpu"], r["pct"]))
    total_cpu = rows[-1]["cpu"]
    body, scrape_s = scraped
    text = body.decode()
    series = [l for l in text.splitlines() if l and not l.startswith("#")]
    guest_series = [l for l in series if l.startswith("plimsoll_guest_")]
    ticks = metric_value(final_text, "plimsoll_tick_duration_seconds_count")
    tick_sum = metric_value(final_text, "plimsoll_tick_duration_seconds_sum")
    print("\nguests: %d, tick: %s, warm-up: %.0f s, sampled: %.0f s (%d samples)" % (
        args.guests, args.tick, args.warmup, elapsed, len(rows)))
    print("RSS: %.1f MiB at the end, %.1f-%.1f MiB while sampled; VmHWM (peak, start-up included): %.1f MiB" % (
        rows[-1]["rss"] / 1024, min(r["rss"] for r in rows) / 1024, max(r["rss"] for r in rows) / 1024,
        rows[-1]["hwm"] / 1024))
    print("at the end: RssAnon %.1f MiB, RssFile %.1f MiB (shared libraries); Pss %.1f MiB (Pss_Anon %.1f, Pss_File %.1f)" % (
        rows[-1]["anon"] / 1024, rows[-1]["file"] / 1024, pss["Pss"] / 1024, pss["Pss_Anon"] / 1024, pss["Pss_File"] / 1024))
    print("VmRSS without the test driver's share: %.1f MiB at the end" % ((rows[-1]["rss"] - driver_kib) / 1024))
    print("resident at the end, by mapping: library file pages %.1f MiB, anonymous pages in library mappings %.1f MiB, "
          "anonymous mappings (heap, arenas, stacks) %.1f MiB (largest %.1f MiB), of which the test driver's ~%.1f MiB" % (
              smaps["lib_file"] / 1024, smaps["lib_anon"] / 1024, smaps["anon"] / 1024, smaps["largest_anon"] / 1024,
              driver_kib / 1024))
    print("CPU: %.2f s in %.0f s = %.2f%% of one core (per interval: %.2f-%.2f%%)" % (
        total_cpu, elapsed, 100 * total_cpu / elapsed, min(r["pct"] for r in rows[1:]), max(r["pct"] for r in rows[1:])))
    if ticks:
        print("ticks since start: %d, mean tick (plimsoll_tick_duration_seconds): %.2f ms" % (
            ticks, 1000 * tick_sum / ticks))
    print("/metrics: %d bytes, %d series (%d plimsoll_guest_*), scraped in %.1f ms; %d scrapes while sampling" % (
        len(body), len(series), len(guest_series), 1000 * scrape_s, scrapes))
    print("load average (1/5/15 min): %s before sampling, %s after" % (load_before, load_after))
    print("since start: %.0f s" % (time.monotonic() - t_start))
    if args.keep:
        print("work directory: " + work)
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
