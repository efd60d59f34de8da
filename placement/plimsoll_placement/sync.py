"""One sync = read the line -> read Placement -> plan (pure, inventory.plan) -> PUT if changed.

The Syncer owns the loop's state: the provider's UUID once found, the failure streak that sets
the backoff, and what was last logged, so that a stale or unreachable plimsolld, or a Placement
that keeps failing, is said once per change and not once per loop. Not thread-safe: one thread
runs it. Time comes from the caller (`now`), so tests drive it without sleeping."""

import logging

from plimsoll_placement import inventory
from plimsoll_placement.placement_api import PlacementError

log = logging.getLogger("plimsoll-placement")

CONFLICT_RETRIES = 5


class Result:
    """What one sync did: ok (Placement at the line's offer, or nothing to do), the plan, and
    the failure reason or the line's state when not ok."""

    def __init__(self, ok, plan=None, reason=None, message=""):
        self.ok, self.plan, self.reason, self.message = ok, plan, reason, message

    def __repr__(self):
        return "Result(ok=%s, reason=%s, plan=%s, %s)" % (self.ok, self.reason, self.plan, self.message)


class Syncer:
    def __init__(self, line_source, placement, metrics, rp_name, rp_uuid, interval, backoff_max):
        self.line_source = line_source
        self.placement = placement
        self.metrics = metrics
        self.rp_name = rp_name
        self.rp_uuid = rp_uuid or None
        self.interval = interval
        self.backoff_max = backoff_max
        self.failures = 0           # consecutive failed syncs (Placement side)
        self.last_failure = None    # reason of the last one logged
        self.line_problem = None    # the line's unusable kind, while it is
        self.last_line_tick = None

    def next_delay(self):
        """Seconds until the next sync: the interval, or interval * 2^failures (<= backoff_max)."""
        if self.failures == 0:
            return self.interval
        return min(self.backoff_max, self.interval * (2 ** min(self.failures, 30)))

    def sync(self, now):
        """One sync. Never raises for a Placement or plimsolld failure: it is counted, logged on
        change, and the next delay backs off."""
        line, running = self.line_source.read()
        if line.state != "ok":
            self._line_unusable(line)
            return Result(False, reason="line_" + line.state, message=line.reason)
        if self.line_problem is not None:
            log.info("plimsolld's line is usable again (tick %d, was %s): syncing", line.tick, self.line_problem)
            self.metrics.set("plimsoll_placement_line_unusable", 0, self.line_problem)
            self.line_problem = None
        self.metrics.set("plimsoll_placement_line_tick", line.tick)
        try:
            result = self._sync_placement(line, running, now)
        except PlacementError as e:
            return self._failed(e.reason, str(e))
        if self.failures:
            log.info("Placement sync recovered after %d failed attempts", self.failures)
        self.failures, self.last_failure = 0, None
        return result

    def _line_unusable(self, line):
        self.metrics.inc("plimsoll_placement_line_unusable_total", line.state)
        if self.line_problem != line.state:
            if self.line_problem is not None:
                self.metrics.set("plimsoll_placement_line_unusable", 0, self.line_problem)
            self.metrics.set("plimsoll_placement_line_unusable", 1, line.state)
            log.warning("no usable line from plimsolld (%s: %s): Placement keeps its last value until it is back",
                        line.state, line.reason)
            self.line_problem = line.state

    def _failed(self, reason, message):
        self.failures += 1
        self.metrics.inc("plimsoll_placement_sync_failures_total", reason)
        # Said when the reason changes and at 1, 2, 4, 8, ... failures: a Placement that stays
        # down does not fill the journal.
        if reason != self.last_failure or (self.failures & (self.failures - 1)) == 0:
            log.error("Placement sync failed (%s, %d in a row; retry in %gs, the last value stays): %s",
                      reason, self.failures, self.next_delay(), message)
        self.last_failure = reason
        return Result(False, reason=reason, message=message)

    def _sync_placement(self, line, running, now):
        if self.rp_uuid is None:
            self.rp_uuid = self.placement.provider_uuid(self.rp_name)
            log.info("resource provider %r is %s", self.rp_name, self.rp_uuid)
        for attempt in range(CONFLICT_RETRIES + 1):
            allocations = self.placement.memory_allocations(self.rp_uuid)
            generation, record = self.placement.memory_inventory(self.rp_uuid)
            if record is None:
                raise PlacementError("no_inventory", "resource provider %s has no MEMORY_MB inventory yet "
                                     "(nova-compute creates it when it starts)" % self.rp_uuid)
            inv = inventory.Inventory(
                total=int(record["total"]), reserved=int(record.get("reserved", 0)),
                min_unit=int(record.get("min_unit", 1)), max_unit=int(record.get("max_unit", record["total"])),
                step_size=int(record.get("step_size", 1)), allocation_ratio=float(record.get("allocation_ratio", 1.0)))
            used = sum(allocations.values())
            pending = inventory.pending_mb(allocations, running)
            plan = inventory.plan(line, inv, used, pending)
            self.metrics.set("plimsoll_placement_pending_mb", pending)
            if plan.action == "skip":  # total <= reserved: no ratio makes room
                raise PlacementError("nothing_to_scale", plan.reason)
            if plan.action == "update":
                new = dict(total=inv.total, reserved=inv.reserved, min_unit=inv.min_unit, max_unit=inv.max_unit,
                           step_size=inv.step_size, allocation_ratio=plan.allocation_ratio)
                try:
                    self.placement.put_memory_inventory(self.rp_uuid, generation, new)
                except PlacementError as e:
                    if e.reason != "conflict" or attempt == CONFLICT_RETRIES:
                        raise
                    self.metrics.inc("plimsoll_placement_conflicts_total")
                    log.info("generation %d of %s moved (409): re-reading", generation, self.rp_uuid)
                    continue
                self.metrics.inc("plimsoll_placement_updates_total")
                log.info("placement updated rp=%s tick=%d capacity=%dMiB free=%dMiB allocation_ratio=%.6f was=%dMiB %s",
                         self.rp_uuid, line.tick, plan.capacity_mb, plan.room_mb, plan.allocation_ratio,
                         inventory.capacity_mb(inv), plan.reason)
            self.metrics.set("plimsoll_placement_last_sync_timestamp_seconds", now)
            self.metrics.set("plimsoll_placement_offered_bytes", max(0, line.offered_bytes))
            self.metrics.set("plimsoll_placement_capacity_mb", plan.capacity_mb)
            self.metrics.set("plimsoll_placement_free_mb", plan.room_mb)
            return Result(True, plan=plan)
        raise AssertionError("unreachable")
