#!/bin/bash
# Sourced by the project's scripts: Bazel state under the checkout, a known USER,
# and none of the environment that would make Bazel download or relocate itself.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export USER="${USER:-root}"
unset USE_BAZEL_VERSION TEST_TMPDIR
if [ ! -f "$ROOT/.bazelrc.user" ] || ! grep -q "$ROOT/.bazel-state" "$ROOT/.bazelrc.user"; then
  echo "startup --output_user_root=$ROOT/.bazel-state" > "$ROOT/.bazelrc.user"
fi
