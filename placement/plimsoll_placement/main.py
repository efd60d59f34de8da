"""plimsoll-placement's entry point: flags and config, --check_config, --once, the loop."""

import logging
import os
import signal
import sys
import threading
import time

from plimsoll_placement import config as config_mod
from plimsoll_placement import line_source, metrics as metrics_mod, placement_api, sync

log = logging.getLogger("plimsoll-placement")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_LINE = 0, 1, 2, 3


def default_stubs_dir():
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gen")


def main(argv=None):
    args = config_mod.parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s plimsoll-placement: %(message)s")
    try:
        file_values = config_mod.read_file(args.config) if args.config else {}
        cfg = config_mod.build(file_values, vars(args))
    except config_mod.ConfigError as e:
        print("plimsoll-placement: invalid configuration: %s" % e, file=sys.stderr)
        return EXIT_USAGE
    if args.check_config:
        print(config_mod.describe(cfg))
        return EXIT_OK
    stubs = cfg.stubs_dir or default_stubs_dir()
    try:
        source = line_source.LineSource(cfg.plimsolld, stubs, cfg.plimsolld_ca_file, cfg.plimsolld_cert_file,
                                        cfg.plimsolld_key_file, timeout=min(cfg.timeout, 10.0))
        placement = placement_api.connect(cfg)
    except (RuntimeError, OSError) as e:
        print("plimsoll-placement: %s" % e, file=sys.stderr)
        return EXIT_USAGE
    except placement_api.PlacementError as e:
        print("plimsoll-placement: %s" % e, file=sys.stderr)
        return EXIT_FAILED
    metrics = metrics_mod.Metrics()
    syncer = sync.Syncer(source, placement, metrics, cfg.resource_provider_name, cfg.resource_provider_uuid,
                         cfg.interval, cfg.backoff_max)
    if args.once:
        r = syncer.sync(time.time())
        if r.ok:
            p = r.plan
            print("synced: %s capacity=%dMiB free=%dMiB allocation_ratio=%.6f (%s)" %
                  (p.action, p.capacity_mb, p.room_mb, p.allocation_ratio, p.reason))
            return EXIT_OK
        print("plimsoll-placement: not synced (%s): %s" % (r.reason, r.message), file=sys.stderr)
        return EXIT_NO_LINE if r.reason.startswith("line_") else EXIT_FAILED
    if cfg.metrics_listen:
        try:
            metrics_mod.serve(metrics, cfg.metrics_listen)
        except OSError as e:
            print("plimsoll-placement: metrics_listen %s: %s" % (cfg.metrics_listen, e), file=sys.stderr)
            return EXIT_USAGE
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("started: plimsolld=%s provider=%s interval=%gs placement auth=%s metrics=%s", cfg.plimsolld,
             cfg.resource_provider_uuid or repr(cfg.resource_provider_name), cfg.interval, cfg.auth,
             cfg.metrics_listen or "off")
    while not stop.is_set():
        try:
            syncer.sync(time.time())
        except Exception:  # a bug, not a failure of Placement or plimsolld: say it, keep going
            log.exception("sync raised; retrying")
            syncer.failures += 1
        stop.wait(syncer.next_delay())
    log.info("stopped")
    return EXIT_OK
