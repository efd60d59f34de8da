// One domain's record of libvirt's bulk stats call (virConnectGetAllDomainStats with the STATE,
// BALLOON and BLOCK groups) read into what the hypervisor layer needs: the domain's state and
// balloon ceiling and size, its balloon stats, and its disk reads (block_reads.h).
//
// Plain data in, no libvirt types: libvirt_hypervisor.cc turns each virTypedParameter into a
// StatField (names and values as libvirt sent them) and calls ParseBulkRecord, so the parsing is
// pure, table tested (bulk_stats_test.cc) and fuzzed (fuzz/bulk_stats_fuzz.cc).
//
// What the caller may rely on, whatever the fields:
//  - sizes are bytes, converted from libvirt's KiB, and never negative: a negative integer reads
//    as 0 (as libvirt's own unsigned fields would), and a KiB count whose bytes do not fit an
//    int64_t is ignored (not wrapped, not clamped to a made-up size);
//  - a field of a type other than an integer (double, boolean, string, an unknown type) is
//    ignored, and so is any field name this parser does not know;
//  - when a name comes twice the last usable value wins (an ignored one does not replace it);
//    for disks, per disk (block_reads.h);
//  - it never fails: a record can only lack things, and callers decide what a lack means.
#ifndef PLIMSOLL_SERVER_HYPERVISOR_BULK_STATS_H_
#define PLIMSOLL_SERVER_HYPERVISOR_BULK_STATS_H_

#include <cstdint>
#include <optional>
#include <variant>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/hypervisor/hypervisor.h"

namespace plimsoll::hypervisor {

// The value of one typed parameter, in each of the types a virTypedParameter can carry
// (VIR_TYPED_PARAM_INT, UINT, LLONG, ULLONG, DOUBLE, BOOLEAN, STRING). std::monostate stands for
// a type this code does not know (a newer libvirt's): such a field is there but unusable.
using StatValue =
    std::variant<std::monostate, int32_t, uint32_t, int64_t, uint64_t, double, bool, absl::string_view>;

// One (name, value) of a record, e.g. {"balloon.current", uint64_t{1048576}}. Views only: the
// caller keeps the names and strings alive while it parses.
struct StatField {
  absl::string_view name;
  StatValue value;
};

// What one record says about its domain. Every part is optional: libvirt leaves a group out when
// it was not asked for or the driver cannot fill it (the test driver's records carry no balloon
// fields; a domain busy with a job under NOWAIT reports no guest stats).
struct BulkRecord {
  // state.state, libvirt's virDomainState number, when an integer; the caller maps it (libvirt's
  // enum stays in libvirt_hypervisor.cc). A negative one reads as 0 (VIR_DOMAIN_NOSTATE).
  std::optional<uint64_t> state;
  // balloon.maximum: the <memory> ceiling, in bytes.
  std::optional<int64_t> max_bytes;
  // How many fields named balloon.* the record has, of any type, known or not. Zero means the
  // driver sent no balloon group at all (the test driver): the caller asks per domain instead.
  int balloon_fields = 0;
  // The balloon.* stats (actual_bytes is balloon.current, the live balloon size) and the disk
  // reads summed over block.<n>.rd.bytes / rd.reqs (BlockReadSum).
  BalloonStats stats;
};

// Reads one domain's record. Pure and linear in the number of fields.
BulkRecord ParseBulkRecord(absl::Span<const StatField> fields);

// Stores one memory stat by its bulk name after "balloon." ("current", "unused", "usable",
// "available", "disk_caches", "rss": KiB, stored as bytes; "swap_in", "swap_out": KiB, stored as
// they are; "major_fault", "minor_fault": counts; "last-update": unix seconds). Returns false,
// storing nothing, for other names and for values out of the field's range (see above). Also the
// per-domain path's conversion (virDomainMemoryStats, whose tags libvirt_hypervisor.cc names so),
// so both paths read a stat the same way.
bool StoreBalloonStat(absl::string_view name, uint64_t value, BalloonStats* out);

// A KiB count in bytes; nullopt when that does not fit an int64_t.
std::optional<int64_t> KiBToBytes(uint64_t kib);

}  // namespace plimsoll::hypervisor

#endif  // PLIMSOLL_SERVER_HYPERVISOR_BULK_STATS_H_
