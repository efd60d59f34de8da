#!/usr/bin/python3
"""Starts the demo's lab: three 1 GiB guests without any network interface, each running
plimsoll-agent over its own virtio-serial port (org.plimsoll.agent.0), as packaged guests do.

  tools/demo_lab.py up --state DIR     prints URI=... and returns
  tools/demo_lab.py down --state DIR

plimsolld finds each guest's channel in its domain XML: it needs no agent listener, no token and
no host key (docs/agent.md, "virtio-serial").
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
    args = ap.parse_args()
    if args.command == "down":
        harness.labmod.down(os.path.realpath(args.state))
        return 0
    os.makedirs(args.state, exist_ok=True)
    lab = harness.labmod.Lab(state_dir=os.path.join(args.state, "lab"), workload_bin=harness.WORKLOAD,
                             cleanup_at_exit=False)
    lab.start()
    for name, kw in GUESTS:
        lab.add_guest(name, memory_mib=1024, network=False, **kw, **harness.channel_agent(interval="2s"))
    for name, _ in GUESTS:
        lab.wait_ready(name, timeout=120)
    print("URI=" + lab.uri)
    return 0


if __name__ == "__main__":
    sys.exit(main())
