#!/usr/bin/python3
"""Starts the demo's lab: three 1 GiB guests, each running plimsoll-agent with its own token.

  tools/demo_lab.py up --state DIR --bin BAZEL_BIN --agent-port PORT   prints URI=... and returns
  tools/demo_lab.py down --state DIR

The host key is created in DIR; plimsolld must be started with
--agent_host_key_file=DIR/agent-host.key --agent_listen=127.0.0.1:PORT.
"""

import argparse
import os
import sys

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

GUESTS = [("stream", dict(workload="stream")), ("hot", dict(workload="hot")),
          ("anon", dict(workload="anon", anon_mib=400, anon_after=60))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["up", "down"])
    ap.add_argument("--state", required=True)
    ap.add_argument("--agent-port", type=int, default=9588)
    args = ap.parse_args()
    if args.command == "down":
        harness.labmod.down(os.path.realpath(args.state))
        return 0
    os.makedirs(args.state, exist_ok=True)
    keys = harness.AgentKeys(args.state)
    keys.port = args.agent_port
    lab = harness.labmod.Lab(state_dir=os.path.join(args.state, "lab"), workload_bin=harness.WORKLOAD,
                             cleanup_at_exit=False)
    lab.start()
    for name, kw in GUESTS:
        lab.add_guest(name, memory_mib=1024, **kw, **keys.guest_kwargs(interval="2s"))
    for name, _ in GUESTS:
        lab.wait_ready(name, timeout=120)
    print("URI=" + lab.uri)
    print("HOST_KEY=" + keys.host_key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
