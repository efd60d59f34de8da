#!/bin/bash
# Bazel wrapper: Debian's python3-grpcio and python3-protobuf live with /usr/bin/python3.
# $1: the daemon binary under the runfiles (server/plimsolld or the fake).
set -eu
if ! /usr/bin/python3 -c "import grpc, google.protobuf" 2>/dev/null; then
  echo "python3-grpcio and python3-protobuf (Debian) are required: apt-get install python3-grpcio python3-protobuf" >&2
  exit 1
fi
R="${TEST_SRCDIR}/${TEST_WORKSPACE}"
exec /usr/bin/python3 "$R/tests/python_client/control_client_test.py" --plimsolld="$R/$1" \
  --proto_root="$R/proto" --extra_proto_root="$R/tests/python_client/protos" "${@:2}"
