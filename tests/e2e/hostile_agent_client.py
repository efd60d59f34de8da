#!/usr/bin/python3
"""A hostile plimsoll-agent, driven from the host against plimsolld's agent listener over
real gRPC (TCP loopback), and a control-API latency probe. Used by test_hostile_agent_e2e.py.

Runs under Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf); the stubs are
generated at start from proto/ with protoc and Debian's grpc_python_plugin. Each subcommand
prints one JSON object on stdout with what it saw, for the test to assert on.

  hostile_agent_client.py spoof     --port P --uuid H --token HEX --victim V --stranger S --stranger-token HEX
  hostile_agent_client.py absurd    --port P --uuid H --token HEX --max-bytes N
  hostile_agent_client.py backwards --port P --uuid H --token HEX --max-bytes N
  hostile_agent_client.py oversized --port P --uuid H --token HEX --max-bytes N
  hostile_agent_client.py conns     --port P --streams 1100 --raw 900 --trickle 10
  hostile_agent_client.py flood     --port P --uuid H --token HEX --max-bytes N --seconds 8
  hostile_agent_client.py latency   --socket PATH --until-file F --ready-file R --min-calls 50
  hostile_agent_client.py inflate   --port P --uuid H --token HEX --max-bytes N --lie-file L --until-file F
  hostile_agent_client.py reclaim   --port P --uuid H --token HEX --max-bytes N --lie-file L --until-file F

H is a guest whose token the attacker holds (it is root in H); V a guest it wants to hurt.
"""

import argparse
import asyncio
import hashlib
import hmac
import json
import math
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_ROOT = os.path.realpath(os.path.join(HERE, "..", "..", "proto"))
PROOF_LABEL = b"plimsoll-agent-report-v1\0"
MIB = 1 << 20
U64_MAX = (1 << 64) - 1

try:
    import grpc
    import grpc.aio
except ImportError:
    sys.stderr.write("python3-grpcio is required (apt-get install python3-grpcio python3-protobuf)\n")
    sys.exit(3)


def load_stubs():
    """Generates the Python stubs of agent.proto and control.proto into a temp dir."""
    out = tempfile.mkdtemp(prefix="plimsoll-stubs-")
    files = ["plimsoll/v1/agent.proto", "plimsoll/v1/types.proto", "plimsoll/v1/control.proto"]
    plugin = "/usr/bin/grpc_python_plugin"
    subprocess.run(["protoc", "-I" + PROTO_ROOT, "--python_out=" + out, "--grpc_out=" + out,
                    "--plugin=protoc-gen-grpc=" + plugin] + files, check=True)
    sys.path.insert(0, out)
    from plimsoll.v1 import agent_pb2, agent_pb2_grpc, control_pb2, control_pb2_grpc  # noqa: E402
    return agent_pb2, agent_pb2_grpc, control_pb2, control_pb2_grpc


pb, pb_grpc, cpb, cpb_grpc = load_stubs()


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# ---- reports ------------------------------------------------------------------------------------
class Guest:
    """What the attacker knows about the guest it reports as: uuid, token, a boot it invents."""

    def __init__(self, uuid, token_hex, max_bytes=512 * MIB):
        self.uuid = uuid
        self.token = bytes.fromhex(token_hex) if token_hex else b""
        self.max_bytes = max_bytes
        self.boot_id = str(uuidlib.uuid4())
        self.seq = 0
        self.boottime_ns = int(time.monotonic() * 1e9) + 3600 * 10**9

    def report(self, nonce, advance_s=1.0, **over):
        """A plausible report, `over` replacing parts: meminfo/vmstat/psi dicts, or top fields."""
        self.seq += 1
        self.boottime_ns += int(advance_s * 1e9)
        total = min(self.max_bytes - 32 * MIB, 480 * MIB)
        r = pb.AgentReport(guest_uuid=self.uuid, boot_id=self.boot_id, sequence=self.seq,
                           boottime_ns=self.boottime_ns, stream_nonce=nonce)
        mem = dict(mem_total_bytes=total, mem_free_bytes=100 * MIB, mem_available_bytes=300 * MIB,
                   cached_bytes=200 * MIB, active_file_bytes=120 * MIB, inactive_file_bytes=60 * MIB,
                   anon_pages_bytes=40 * MIB)
        mem.update(over.pop("meminfo", {}))
        for k, v in mem.items():
            setattr(r.meminfo, k, v)
        vm = dict(workingset_refault_file=1000 + self.seq, pgmajfault=500 + self.seq, oom_kill=0)
        vm.update(over.pop("vmstat", {}))
        for k, v in vm.items():
            setattr(r.vmstat, k, v)
        psi = dict(avg10=0.5, avg60=0.25, avg300=0.1, total_us=1_000_000 + 1000 * self.seq)
        psi.update(over.pop("psi", {}))
        for k, v in psi.items():
            setattr(r.memory_pressure.some, k, v)
        r.agent.version = "hostile"
        r.agent.interval_ms = 1000
        for k, v in over.items():
            setattr(r, k, v)
        return r

    def sign(self, report_bytes, token=None):
        key = self.token if token is None else token
        return hmac.new(key, PROOF_LABEL + report_bytes, hashlib.sha256).digest()

    def frame(self, report, token=None, proof=None, pad=0):
        data = report.SerializeToString()
        if pad:
            # An unknown field (number 1000, bytes): the proof still covers it.
            data += b"\xc2\x3e" + _varint(pad) + b"x" * pad
        return pb.SignedAgentReport(report=data, proof=self.sign(data, token) if proof is None else proof)


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


# ---- streams ------------------------------------------------------------------------------------
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1), ("grpc.enable_retries", 0),
                   ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", 1 << 20)]


class Stream:
    """One AgentChannel.Report stream on its own connection."""

    def __init__(self, port, channel=None):
        self.own_channel = channel is None
        self.channel = channel or grpc.aio.insecure_channel("127.0.0.1:%d" % port, options=CHANNEL_OPTIONS)
        self.call = pb_grpc.AgentChannelStub(self.channel).Report()
        self.nonce = None
        self.status = None  # (code name, details) once ended
        self.opened = time.monotonic()
        self.ended = None
        self.last_ack = None  # the AgentReportAck of the last send() answered

    async def hello(self, timeout=30):
        """Waits for the hello; returns True, or False when the stream ended instead."""
        reply = await self.read(timeout)
        if reply is None:
            return False
        if reply.WhichOneof("reply") != "hello":
            raise RuntimeError("first reply is not a hello: %s" % reply)
        self.nonce = reply.hello.nonce
        return True

    async def read(self, timeout=30):
        try:
            reply = await asyncio.wait_for(self.call.read(), timeout)
        except grpc.aio.AioRpcError as e:
            self._end(e.code(), e.details())
            return None
        except asyncio.CancelledError:
            if not self.call.cancelled():
                raise
            self._end(grpc.StatusCode.CANCELLED, "cancelled by the client")
            return None
        if reply is grpc.aio.EOF:
            self._end(await self.call.code(), await self.call.details())
            return None
        return reply

    async def write(self, frame):
        try:
            await self.call.write(frame)
            return True
        except grpc.aio.AioRpcError as e:
            self._end(e.code(), e.details())
            return False
        except (asyncio.InvalidStateError, grpc.aio.UsageError):
            # The RPC already ended (plimsolld finished it): its status says why.
            self._end(await self.call.code(), await self.call.details())
            return False

    async def send(self, frame, timeout=30):
        """Writes one frame and reads its ack: ("ack", accepted, reason) or ("ended", code, details)."""
        if not await self.write(frame):
            await self.wait_end(timeout)
            return ("ended",) + tuple(self.status)
        reply = await self.read(timeout)
        if reply is None:
            return ("ended",) + tuple(self.status)
        self.last_ack = reply.ack
        return ("ack", reply.ack.accepted, reply.ack.reject_reason)

    async def wait_end(self, timeout=60):
        """Reads until the stream ends; returns (code, details)."""
        deadline = time.monotonic() + timeout
        while self.status is None and time.monotonic() < deadline:
            if await self.read(max(0.1, deadline - time.monotonic())) is None:
                break
        return self.status

    def _end(self, code, details):
        if self.status is None:
            self.status = (code.name if hasattr(code, "name") else str(code), details or "")
            self.ended = time.monotonic()

    async def close(self):
        self.call.cancel()
        if self.own_channel:
            await self.channel.close()


# ---- cases --------------------------------------------------------------------------------------
async def case_spoof(a):
    """Guest H's token used for guest V's uuid, no proof, a made-up token, a replay onto another
    stream, and a valid token of a guest the daemon does not manage."""
    out = {"attempts": []}
    h = Guest(a.uuid, a.token)
    as_victim = Guest(a.victim, a.token)  # V's uuid, H's token: what a root in H can build
    for what, make in (
            ("h_token_for_victim", lambda s: as_victim.frame(as_victim.report(s.nonce))),
            ("no_proof", lambda s: as_victim.frame(as_victim.report(s.nonce), proof=b"")),
            ("random_token", lambda s: as_victim.frame(as_victim.report(s.nonce), token=os.urandom(32))),
    ):
        for _ in range(a.repeat):
            s = Stream(a.port)
            await s.hello()
            out["attempts"].append([what] + list(await s.send(make(s))))
            await s.close()
    # A proven report of H, recorded on one stream, played back on another.
    s1, s2 = Stream(a.port), Stream(a.port)
    await s1.hello()
    await s2.hello()
    recorded = h.frame(h.report(s1.nonce))
    out["attempts"].append(["replay_other_stream"] + list(await s2.send(recorded)))
    await s1.close()
    await s2.close()
    stranger = Guest(a.stranger, a.stranger_token)
    s = Stream(a.port)
    await s.hello()
    out["attempts"].append(["unmanaged_uuid"] + list(await s.send(stranger.frame(stranger.report(s.nonce)))))
    await s.close()
    return out


async def paced(s, frames, gap):
    acks = []
    for f in frames:
        acks.append(list(await s.send(f)))
        await asyncio.sleep(gap)
    return acks


async def case_absurd(a):
    """Authenticated as H: one good report, then absurd sizes, PSI, times and counter jumps."""
    h = Guest(a.uuid, a.token, a.max_bytes)
    s = Stream(a.port)
    await s.hello()
    out = {"steps": []}

    def step(name, **over):
        return name, h.frame(h.report(s.nonce, **over))

    steps = [
        step("baseline", meminfo=dict(active_file_bytes=123 * MIB)),
        step("memtotal_above_max", meminfo=dict(mem_total_bytes=a.max_bytes + MIB)),
        step("memtotal_2^63", meminfo=dict(mem_total_bytes=1 << 63)),
        step("memtotal_zero", meminfo=dict(mem_total_bytes=0)),
        step("cached_u64_max", meminfo=dict(cached_bytes=U64_MAX)),
        step("active_file_above_memtotal", meminfo=dict(active_file_bytes=a.max_bytes)),
        step("psi_avg10_1e9", psi=dict(avg10=1e9)),
        step("psi_avg10_nan", psi=dict(avg10=math.nan)),
        step("psi_avg10_negative", psi=dict(avg10=-5.0)),
        step("boottime_negative", boottime_ns=-1),
        step("boot_id_garbage", boot_id="not-a-uuid"),
    ]
    for name, frame in steps:
        out["steps"].append([name] + list(await s.send(frame)))
        await asyncio.sleep(0.3)  # inside the per-guest budget (2/s): only the checks reject
    # Counter jumps: a uint64 counter wrapping to its maximum within a second, PSI stall time
    # growing 10^9 s in one second.
    for name, over in (("refaults_to_u64_max", dict(vmstat=dict(workingset_refault_file=U64_MAX))),
                       ("psi_total_jump", dict(psi=dict(total_us=10**15)))):
        out["steps"].append([name] + list(await s.send(h.frame(h.report(s.nonce, **over)))))
        await asyncio.sleep(0.3)
    await s.close()
    return out


def idle_meminfo(max_bytes):
    """/proc/meminfo of an idle guest: half its memory free, 60 MiB of cache, 40 MiB of AnonPages
    (with Shmem and SUnreclaim, the agent's own hard-demand reading)."""
    total = max_bytes - 32 * MIB
    return dict(mem_total_bytes=total, mem_free_bytes=total // 2, mem_available_bytes=total * 3 // 4,
                cached_bytes=60 * MIB, active_file_bytes=30 * MIB, inactive_file_bytes=30 * MIB,
                anon_pages_bytes=40 * MIB, shmem_bytes=MIB, sunreclaim_bytes=10 * MIB)


async def open_stream(s, port, out):
    """(stream, ready): `s` while plimsolld has not ended it, else a new one (counted in
    out["streams"]), ready once its hello is answered."""
    if s is not None and s.status is None:
        return s, True
    if s is not None:
        await s.close()
    s = Stream(port)
    out["streams"] += 1
    if not await s.hello():
        await asyncio.sleep(1)
        return s, False
    return s, True


async def case_inflate(a):
    """Authenticated as H, one plausible report a second until --until-file appears: an idle
    guest's numbers (40 MiB AnonPages) while --lie-file is absent, and while it exists AnonPages
    of --anon-mib with little free or available: hard demand on the agent's word alone.
    Reconnects if plimsolld ends the stream."""
    h = Guest(a.uuid, a.token, a.max_bytes)
    out = {"accepted": 0, "lying_accepted": 0, "rejected": {}, "streams": 0}
    honest = idle_meminfo(a.max_bytes)
    lie = dict(honest, mem_free_bytes=20 * MIB, mem_available_bytes=40 * MIB, cached_bytes=30 * MIB,
               active_file_bytes=20 * MIB, inactive_file_bytes=10 * MIB, anon_pages_bytes=a.anon_mib * MIB)
    # No stall, no refaults: the claim is hard demand alone, not pressure.
    calm = dict(avg10=0.0, avg60=0.0, avg300=0.0, total_us=1_000_000)
    deadline = time.monotonic() + a.wait
    s = None
    while not os.path.exists(a.until_file) and time.monotonic() < deadline:
        s, ready = await open_stream(s, a.port, out)
        if not ready:
            continue
        lying = os.path.exists(a.lie_file)
        reply = await s.send(h.frame(h.report(s.nonce, meminfo=lie if lying else honest, psi=calm,
                                              vmstat=dict(workingset_refault_file=1000, pgmajfault=500))))
        if reply[0] == "ack" and reply[1]:
            out["accepted"] += 1
            out["lying_accepted"] += 1 if lying else 0
        else:
            key = reply[2] if reply[0] == "ack" else "ended:" + str(reply[1])
            out["rejected"][key] = out["rejected"].get(key, 0) + 1
        await asyncio.sleep(1.0)
    if s is not None:
        await s.close()
    return out


async def case_reclaim(a):
    """Authenticated as H, one report a second of an idle guest with a reclaimer until
    --until-file appears: its counters still while --lie-file is absent, and while it exists
    growing by --claim-mib-per-s (state active, reason step): reclaim claimed that the guest never
    did. Prints what it claimed and the bounds the acks carried, honest and lying apart.
    Reconnects if plimsolld ends the stream."""
    h = Guest(a.uuid, a.token, a.max_bytes)
    out = {"accepted": 0, "lying_accepted": 0, "rejected": {}, "streams": 0, "claimed_mib": 0,
           "bounds_honest": [], "bounds_lying": []}
    idle = idle_meminfo(a.max_bytes)
    calm = dict(avg10=0.0, avg60=0.0, avg300=0.0, total_us=1_000_000)
    since_ns = h.boottime_ns  # the series begins before the first report
    claimed = 0
    deadline = time.monotonic() + a.wait
    s = None
    while not os.path.exists(a.until_file) and time.monotonic() < deadline:
        s, ready = await open_stream(s, a.port, out)
        if not ready:
            continue
        lying = os.path.exists(a.lie_file)
        if lying:
            claimed += a.claim_mib_per_s * MIB
        r = h.report(s.nonce, meminfo=idle, psi=calm, vmstat=dict(workingset_refault_file=1000, pgmajfault=500))
        rc = r.reclaim
        rc.state = pb.RECLAIM_STATE_ACTIVE if lying else pb.RECLAIM_STATE_IDLE
        rc.reason = "step" if lying else "below_keep"
        rc.counters_since_boottime_ns = since_ns
        rc.requested_bytes = claimed
        rc.achieved_bytes = claimed
        rc.steps = claimed // (64 * MIB)
        rc.file_only = False
        rc.keep_bytes = 256 * MIB
        reply = await s.send(h.frame(r))
        if reply[0] == "ack" and reply[1]:
            out["accepted"] += 1
            out["lying_accepted"] += 1 if lying else 0
            b = s.last_ack.reclaim_bounds if s.last_ack.HasField("reclaim_bounds") else None
            seen = [b.enabled, b.keep_bytes // MIB] if b is not None else None
            key = "bounds_lying" if lying else "bounds_honest"
            if not out[key] or out[key][-1] != seen:
                out[key].append(seen)
        else:
            key = reply[2] if reply[0] == "ack" else "ended:" + str(reply[1])
            out["rejected"][key] = out["rejected"].get(key, 0) + 1
        await asyncio.sleep(1.0)
    if s is not None:
        await s.close()
    out["claimed_mib"] = claimed // MIB
    return out


async def case_backwards(a):
    """Authenticated as H: counters going backwards without a new boot id, a boottime that does
    not advance, then the same low counters under a new boot id (a reboot, accepted)."""
    h = Guest(a.uuid, a.token, a.max_bytes)
    s = Stream(a.port)
    await s.hello()
    base = dict(vmstat=dict(workingset_refault_file=100000, pgmajfault=50000),
                psi=dict(total_us=5_000_000), meminfo=dict(active_file_bytes=77 * MIB))
    frames = [("baseline", h.frame(h.report(s.nonce, **base)))]
    frames.append(("refaults_backwards", h.frame(h.report(
        s.nonce, vmstat=dict(workingset_refault_file=99999, pgmajfault=50001), psi=dict(total_us=5_000_001)))))
    frames.append(("psi_total_backwards", h.frame(h.report(
        s.nonce, vmstat=dict(workingset_refault_file=100001, pgmajfault=50002), psi=dict(total_us=4_000_000)))))
    frames.append(("boottime_not_after_last", h.frame(h.report(
        s.nonce, advance_s=-10, vmstat=dict(workingset_refault_file=100002, pgmajfault=50003),
        psi=dict(total_us=5_000_002)))))
    h.boot_id = str(uuidlib.uuid4())
    frames.append(("new_boot_low_counters", h.frame(h.report(
        s.nonce, vmstat=dict(workingset_refault_file=10, pgmajfault=5), psi=dict(total_us=1000),
        meminfo=dict(active_file_bytes=88 * MIB)))))
    out = {"steps": []}
    for name, f in frames:
        out["steps"].append([name] + list(await s.send(f)))
        await asyncio.sleep(0.3)
    await s.close()
    return out


async def case_oversized(a):
    """Authenticated as H: a report above the 4 KiB validator limit (read, acked, counted), frames
    above the 16 KiB transport limit (the stream is refused by gRPC), then a normal report."""
    h = Guest(a.uuid, a.token, a.max_bytes)
    out = {"steps": []}
    s = Stream(a.port)
    await s.hello()
    out["steps"].append(["report_6KiB"] + list(await s.send(h.frame(h.report(s.nonce), pad=6 * 1024))))
    out["steps"].append(["report_after_it_same_stream"] + list(await s.send(h.frame(h.report(s.nonce)))))
    await s.close()
    for size in (20 * 1024, 4 * MIB):
        s = Stream(a.port)
        await s.hello()
        out["steps"].append(["frame_%dKiB" % (size // 1024)] + list(await s.send(h.frame(h.report(s.nonce), pad=size))))
        await s.close()
        await asyncio.sleep(0.3)
    s = Stream(a.port)
    await s.hello()
    out["steps"].append(["normal_after"] + list(await s.send(h.frame(h.report(s.nonce)))))
    await s.close()
    return out


async def case_flood(a):
    """Authenticated as H: frames as fast as the client can write them, acks not awaited; a cut
    stream is replaced at once, for `seconds`."""
    h = Guest(a.uuid, a.token, a.max_bytes)
    out = {"streams": 0, "frames_sent": 0, "acks": 0, "accepted": 0, "rejects": {}, "ends": {},
           "acks_per_stream_max": 0}
    deadline = time.monotonic() + a.seconds
    while time.monotonic() < deadline:
        s = Stream(a.port)
        if not await s.hello():
            out["ends"][s.status[0]] = out["ends"].get(s.status[0], 0) + 1
            await s.close()
            continue
        out["streams"] += 1
        acks = 0

        async def reader():
            nonlocal acks
            while True:
                reply = await s.read(30)
                if reply is None:
                    return
                acks += 1
                out["acks"] += 1
                if reply.ack.accepted:
                    out["accepted"] += 1
                else:
                    r = reply.ack.reject_reason
                    out["rejects"][r] = out["rejects"].get(r, 0) + 1

        task = asyncio.ensure_future(reader())
        while s.status is None and time.monotonic() < deadline:
            if not await s.write(h.frame(h.report(s.nonce, advance_s=0.001))):
                break
            out["frames_sent"] += 1
        if s.status is None and time.monotonic() >= deadline:
            await s.close()
        await asyncio.wait_for(task, 30)
        out["acks_per_stream_max"] = max(out["acks_per_stream_max"], acks)
        code = s.status[0] if s.status else "none"
        key = code + ":" + (s.status[1] if s.status else "")
        out["ends"][key] = out["ends"].get(key, 0) + 1
        await s.close()
    out["seconds"] = a.seconds
    return out


async def case_conns(a):
    """Thousands of connections: `raw` TCP connections that never speak HTTP/2, then `trickle`
    streams that send a junk frame every 2 s and never prove an identity, then `streams` silent
    gRPC streams, each on its own connection. Reports how many got a hello (were let in), were
    refused, and how and when each ended."""
    out = {"fd_limit": raise_fd_limit()}
    t0 = time.monotonic()
    raws = []
    for _ in range(a.raw):
        c = socket.create_connection(("127.0.0.1", a.port), timeout=10)
        c.setblocking(False)
        raws.append(c)
    out["raw_connected"] = len(raws)
    out["raw_connect_s"] = round(time.monotonic() - t0, 2)

    trickles = [Stream(a.port) for _ in range(a.trickle)]
    await asyncio.gather(*(s.hello() for s in trickles))

    async def trickle(s):
        sent = 0
        while s.status is None:
            junk = pb.SignedAgentReport(report=b"\xff\xff junk", proof=os.urandom(32))
            if not await s.write(junk):
                break
            sent += 1
            if await s.read(30) is None:
                break
            await asyncio.sleep(2)
        return sent

    trickle_tasks = [asyncio.ensure_future(trickle(s)) for s in trickles]
    t1 = time.monotonic()
    silent = [Stream(a.port) for _ in range(a.streams)]
    hellos = await asyncio.gather(*(s.hello(60) for s in silent))
    out["open_s"] = round(time.monotonic() - t1, 2)
    out["silent_hello"] = sum(1 for h in hellos if h)
    out["silent_refused"] = sum(1 for s in silent if s.status and s.status[0] == "RESOURCE_EXHAUSTED")
    out["silent_other"] = sorted({str(s.status) for s in silent if s.status and s.status[0] != "RESOURCE_EXHAUSTED"})
    out["peak_marker_s"] = round(time.monotonic() - t0, 2)
    sys.stderr.write("conns: %d raw, %d trickle, %d silent in (%d refused) after %.1fs\n" % (
        len(raws), len(trickles), out["silent_hello"], out["silent_refused"], time.monotonic() - t0))
    if a.peak_file:
        with open(a.peak_file, "w") as f:
            f.write("peak\n")

    # Everything let in must be ended by plimsolld, not by us.
    admitted = [s for s, h in zip(silent, hellos) if h]
    await asyncio.gather(*(s.wait_end(a.wait) for s in admitted))
    trickle_sent = await asyncio.gather(*(asyncio.wait_for(t, a.wait) for t in trickle_tasks))
    ends = {}
    lifetimes = []
    for s in admitted + trickles:
        key = "%s:%s" % s.status if s.status else "still_open"
        ends[key] = ends.get(key, 0) + 1
        if s.ended:
            lifetimes.append(s.ended - s.opened)
    out["admitted_ends"] = ends
    out["lifetime_s_min"] = round(min(lifetimes), 2) if lifetimes else None
    out["lifetime_s_max"] = round(max(lifetimes), 2) if lifetimes else None
    out["trickle_frames_sent"] = sum(trickle_sent)
    out["trickle_ends"] = sorted({"%s:%s" % s.status for s in trickles if s.status})

    # The raw connections never sent an HTTP/2 preface: the server must close them by itself.
    deadline = time.monotonic() + a.wait
    open_raws = list(raws)
    while open_raws and time.monotonic() < deadline:
        still = []
        for c in open_raws:
            try:
                while True:
                    if not c.recv(65536):
                        c.close()
                        break
            except BlockingIOError:
                still.append(c)
            except OSError:
                c.close()
        open_raws = still
        if open_raws:
            await asyncio.sleep(0.5)
    out["raw_closed_by_server"] = len(raws) - len(open_raws)
    out["raw_all_closed_after_s"] = None if open_raws else round(time.monotonic() - t0, 1)
    for c in open_raws:
        c.close()
    for s in silent + trickles:
        await s.close()
    out["total_s"] = round(time.monotonic() - t0, 1)
    return out


async def case_latency(a):
    """GetHostStatus on the control socket, one call every `interval`, until `until_file`
    exists and at least `min_calls` were made. Latencies in milliseconds."""
    ch = grpc.aio.insecure_channel("unix:" + a.socket)
    stub = cpb_grpc.ControlStub(ch)
    await stub.GetHostStatus(cpb.GetHostStatusRequest(), timeout=10)  # connect outside the figures
    if a.ready_file:
        with open(a.ready_file, "w") as f:
            f.write("ready\n")
    lat, errors = [], []
    while len(lat) + len(errors) < a.min_calls or not os.path.exists(a.until_file):
        t = time.perf_counter()
        try:
            await stub.GetHostStatus(cpb.GetHostStatusRequest(), timeout=5)
            lat.append((time.perf_counter() - t) * 1000)
        except grpc.aio.AioRpcError as e:
            errors.append(e.code().name)
        await asyncio.sleep(a.interval)
    await ch.close()
    lat.sort()

    def pct(p):
        return round(lat[min(len(lat) - 1, int(math.ceil(p / 100.0 * len(lat))) - 1)], 2) if lat else None

    return {"calls": len(lat), "errors": errors, "p50_ms": pct(50), "p99_ms": pct(99),
            "max_ms": round(lat[-1], 2) if lat else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["spoof", "absurd", "backwards", "oversized", "conns", "flood", "latency",
                                     "inflate", "reclaim"])
    ap.add_argument("--port", type=int)
    ap.add_argument("--uuid")
    ap.add_argument("--token")
    ap.add_argument("--victim")
    ap.add_argument("--stranger")
    ap.add_argument("--stranger-token")
    ap.add_argument("--max-bytes", type=int, default=512 * MIB)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--streams", type=int, default=1100)
    ap.add_argument("--raw", type=int, default=900)
    ap.add_argument("--trickle", type=int, default=10)
    ap.add_argument("--wait", type=float, default=60)
    ap.add_argument("--peak-file")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--socket")
    ap.add_argument("--until-file")
    ap.add_argument("--lie-file")
    ap.add_argument("--anon-mib", type=int, default=900)
    ap.add_argument("--claim-mib-per-s", type=int, default=200)
    ap.add_argument("--ready-file")
    ap.add_argument("--min-calls", type=int, default=50)
    ap.add_argument("--interval", type=float, default=0.02)
    a = ap.parse_args()
    fn = globals()["case_" + a.case]
    t0 = time.monotonic()
    cpu0 = time.process_time()
    result = asyncio.run(fn(a))
    result["client_wall_s"] = round(time.monotonic() - t0, 2)
    result["client_cpu_s"] = round(time.process_time() - cpu0, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
