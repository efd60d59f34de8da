#!/bin/bash
# Generates plimsoll-placement's gRPC Python stubs from the protos, with Debian's protoc and
# grpc_python_plugin (protobuf-compiler, protobuf-compiler-grpc):
#   placement/gen_stubs.sh OUT_DIR [PROTO_ROOT]
# OUT_DIR gets plimsoll/v1/{types,control}_pb2.py and control_pb2_grpc.py; PROTO_ROOT defaults
# to the checkout's proto/. Run at build or install time (tools/build_deb.sh, the tests);
# generated code is never committed.
set -euo pipefail
OUT="${1:?usage: gen_stubs.sh OUT_DIR [PROTO_ROOT]}"
ROOT="${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/proto}"
for tool in /usr/bin/protoc /usr/bin/grpc_python_plugin; do
  [ -x "$tool" ] || { echo "gen_stubs: $tool missing: apt-get install protobuf-compiler protobuf-compiler-grpc" >&2; exit 1; }
done
mkdir -p "$OUT"
/usr/bin/protoc -I"$ROOT" --python_out="$OUT" --grpc_out="$OUT" \
  --plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin \
  "$ROOT/plimsoll/v1/types.proto" "$ROOT/plimsoll/v1/control.proto"
# Packages for the import plimsoll.v1.control_pb2 (protoc writes none).
touch "$OUT/plimsoll/__init__.py" "$OUT/plimsoll/v1/__init__.py"
