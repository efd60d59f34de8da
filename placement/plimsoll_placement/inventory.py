"""The inventory arithmetic: pure functions, no I/O, no clock, no logging.

Placement computes, per resource provider and class:

    capacity = (total - reserved) * allocation_ratio        (truncated to an integer)
    free     = capacity - used                              (used: the sum of allocations)

plimsoll-placement keeps nova's `total` and `reserved` and sets `allocation_ratio` so that

    free = room = offered MiB - pending MiB, rounded down to a multiple of step_size
                  (0 when that is below min_unit)

where `pending` is memory allocated in Placement to consumers that plimsolld does not count yet
(a guest scheduled here whose domain has not started). Hence

    capacity = used + room,  allocation_ratio = (capacity + 0.5) / (total - reserved)

The half MiB keeps the truncated capacity at exactly `used + room` whatever the rounding of the
ratio (Placement stores it as a float; MySQL as a 32-bit one, whose error on a million MiB is
well under 0.1 MiB). The capacity is never below `used`: room is never negative.
"""

import collections

MIB = 1024 * 1024

# What Placement holds for MEMORY_MB on the provider, as read from it.
Inventory = collections.namedtuple(
    "Inventory", "total reserved min_unit max_unit step_size allocation_ratio")

# The line as plimsolld gave it, or why there is none.
#   state: "ok", "stale" (HostLine.stale), "unreachable", "unimplemented", "error"
Line = collections.namedtuple("Line", "state offered_bytes tick reason")

# What to do: action is "update" (PUT allocation_ratio), "unchanged" or "skip" (leave Placement
# as it is: the reason says why).
Plan = collections.namedtuple(
    "Plan", "action allocation_ratio capacity_mb room_mb used_mb pending_mb reason")


def capacity_mb(inv):
    """Placement's capacity for an inventory, as Placement truncates it."""
    return int((inv.total - inv.reserved) * inv.allocation_ratio)


def room_mb(offered_bytes, pending_mb, inv):
    """The free MiB to show Placement: the offered headroom less what is pending, rounded down
    to the inventory's step_size, and 0 when below its min_unit (no allocation could use it)."""
    room = max(0, offered_bytes // MIB - max(0, pending_mb))
    step = max(1, inv.step_size)
    room -= room % step
    if room < max(1, inv.min_unit):
        return 0
    return room


def ratio_for(capacity, inv):
    """The allocation_ratio whose truncated capacity is exactly `capacity` MiB."""
    return (capacity + 0.5) / (inv.total - inv.reserved)


def plan(line, inv, used_mb, pending_mb):
    """The inventory change that makes Placement's free MEMORY_MB equal the line's offer.

    line: a Line; inv: the provider's MEMORY_MB Inventory (None: it has none); used_mb: the
    sum of MEMORY_MB allocations on the provider; pending_mb: the part of them whose consumers
    plimsolld does not count yet. A line that is not "ok" never changes anything: the last
    value stays in Placement."""
    if line.state != "ok":
        return Plan("skip", None, None, None, used_mb, pending_mb,
                    "no line from plimsolld (%s%s): Placement left as it is" %
                    (line.state, ": " + line.reason if line.reason else ""))
    if inv is None:
        return Plan("skip", None, None, None, used_mb, pending_mb,
                    "the provider has no MEMORY_MB inventory (nova-compute creates it)")
    usable = inv.total - inv.reserved
    if usable <= 0:
        return Plan("skip", None, None, None, used_mb, pending_mb,
                    "total %d <= reserved %d: nothing to scale" % (inv.total, inv.reserved))
    room = room_mb(line.offered_bytes, pending_mb, inv)
    capacity = used_mb + room
    why = "offered=%dMiB pending=%dMiB used=%dMiB room=%dMiB capacity=%dMiB (total=%d reserved=%d step=%d)" % (
        max(0, line.offered_bytes) // MIB, pending_mb, used_mb, room, capacity, inv.total, inv.reserved,
        inv.step_size)
    if capacity_mb(inv) == capacity:
        return Plan("unchanged", inv.allocation_ratio, capacity, room, used_mb, pending_mb, why)
    return Plan("update", ratio_for(capacity, inv), capacity, room, used_mb, pending_mb, why)


def pending_mb(allocations, known_consumers):
    """MEMORY_MB allocated to consumers plimsolld does not count: {consumer: mb}, a set of
    lower-case UUIDs -> MiB."""
    return sum(mb for consumer, mb in allocations.items() if consumer.lower() not in known_consumers)
