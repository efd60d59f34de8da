"""The plimsolld seam: reads the Plimsoll line (GetHostLine) and the running guests' UUIDs
(ListGuests) over the control API, through Python stubs generated from proto/plimsoll/v1 at
build or install time (placement/gen_stubs.sh). Never raises: every failure is a Line whose
state says why."""

import os
import sys

from plimsoll_placement import inventory


def load_stubs(stubs_dir):
    """Imports control_pb2, control_pb2_grpc, types_pb2 from stubs_dir (made by gen_stubs.sh)."""
    if not os.path.exists(os.path.join(stubs_dir, "plimsoll", "v1", "control_pb2_grpc.py")):
        raise RuntimeError("no gRPC stubs in %s: generate them with placement/gen_stubs.sh %s (protoc and "
                           "grpc_python_plugin: apt-get install protobuf-compiler protobuf-compiler-grpc)" %
                           (stubs_dir, stubs_dir))
    if stubs_dir not in sys.path:
        sys.path.insert(0, stubs_dir)
    from plimsoll.v1 import control_pb2, control_pb2_grpc, types_pb2
    return control_pb2, control_pb2_grpc, types_pb2


class LineSource:
    """One gRPC channel to plimsolld: `unix:/path` (local, no TLS) or `host:port` (mutual TLS
    with ca/cert/key files, as plimsollctl's --server, --ca, --cert, --key)."""

    def __init__(self, target, stubs_dir, ca_file="", cert_file="", key_file="", timeout=5.0):
        import grpc
        self.grpc = grpc
        self.control_pb2, control_pb2_grpc, self.types_pb2 = load_stubs(stubs_dir)
        if target.startswith("unix:"):
            channel = grpc.insecure_channel(target)
        else:
            def read(p):
                with open(p, "rb") as f:
                    return f.read()
            creds = grpc.ssl_channel_credentials(read(ca_file), read(key_file), read(cert_file))
            channel = grpc.secure_channel(target, creds)
        self.stub = control_pb2_grpc.ControlStub(channel)
        self.timeout = timeout

    def read(self):
        """(Line, set of running guests' lower-case UUIDs). The line comes with the guests of
        its own tick (ListGuestsResponse.host_line) when plimsolld sends it there; otherwise
        from GetHostLine right after the guests, so every guest the line counted and still runs
        is among them."""
        grpc = self.grpc
        try:
            guests = self.stub.ListGuests(self.control_pb2.ListGuestsRequest(), timeout=self.timeout)
            if _has(guests, "host_line"):
                line = guests.host_line  # the same tick as the guests
            else:
                line = self.stub.GetHostLine(self.control_pb2.GetHostLineRequest(), timeout=self.timeout)
        except grpc.RpcError as e:
            code = e.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                state = "unreachable"
            elif code == grpc.StatusCode.UNIMPLEMENTED:
                state = "unimplemented"
            else:
                state = "error"
            return inventory.Line(state, 0, 0, "%s: %s" % (code.name, e.details())), set()
        running = {g.uuid.lower() for g in guests.guests
                   if g.run_state == self.types_pb2.GUEST_RUN_STATE_RUNNING}
        if line.stale:
            return inventory.Line("stale", 0, line.tick, line.stale_reason or "stale"), running
        return inventory.Line("ok", line.offered_bytes, line.tick, line.explanation), running


def _has(message, field):
    """message.HasField(field), False for protos that do not have the field."""
    try:
        return message.HasField(field)
    except ValueError:
        return False
