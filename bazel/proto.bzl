"""plimsoll_proto_library: C++ (and optionally gRPC) code from .proto files with Debian's protoc."""

_ALL_PROTOS = [
    "//proto:plimsoll/v1/types.proto",
    "//proto:plimsoll/v1/config.proto",
    "//proto:plimsoll/v1/control.proto",
    "//proto:plimsoll/v1/agent.proto",
]

def plimsoll_proto_library(name, srcs, deps = [], grpc = False, visibility = None):
    """Generates and compiles C++ for `srcs` (paths under //proto, e.g. plimsoll/v1/x.proto).

    Generated headers are included as "plimsoll/v1/x.pb.h".
    """
    bases = [s[:-len(".proto")] for s in srcs]
    outs = []
    for b in bases:
        outs += [b + ".pb.h", b + ".pb.cc"]
        if grpc:
            outs += [b + ".grpc.pb.h", b + ".grpc.pb.cc"]
    cmd = "/usr/bin/protoc -Iproto --cpp_out=$(GENDIR)/proto"
    if grpc:
        cmd += " --grpc_out=$(GENDIR)/proto --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin"
    cmd += " " + " ".join(["proto/" + s for s in srcs])
    native.genrule(
        name = name + "_gen",
        srcs = _ALL_PROTOS,
        outs = outs,
        cmd = cmd,
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        includes = ["."],
        deps = deps + ["//third_party:protobuf"] + (["//third_party:grpc"] if grpc else []),
        visibility = visibility,
    )
