// Checks shared by the config fuzz targets (server/config/config.h states the contract).
#ifndef PLIMSOLL_FUZZ_CONFIG_FUZZ_UTIL_H_
#define PLIMSOLL_FUZZ_CONFIG_FUZZ_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/config/config.h"

namespace plimsoll::fuzz {

// The dotted path of every leaf value set in `m` ("host.proc_root"), once per element of a
// repeated field.
inline void SetLeaves(const google::protobuf::Message& m, const std::string& prefix,
                      std::vector<std::string>* out) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    const std::string path = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE && !f->is_repeated()) {
      SetLeaves(m.GetReflection()->GetMessage(m, f), path, out);
    } else {
      const int n = f->is_repeated() ? m.GetReflection()->FieldSize(m, f) : 1;
      for (int i = 0; i < n; ++i) out->push_back(path);
    }
  }
}

// Resolve's promise: a config it accepts is within every documented range.
inline void CheckOptions(const server::Options& o) {
  FUZZ_CHECK(!o.libvirt_uri.empty());
  FUZZ_CHECK(!o.grpc_listen.empty());
  FUZZ_CHECK(!o.policy.empty());
  FUZZ_CHECK(o.tick >= absl::Milliseconds(100) && o.tick <= absl::Hours(1));
  FUZZ_CHECK(o.host_reserve_bytes >= 0);
  FUZZ_CHECK(!o.guest_memory_budget_bytes.has_value() || *o.guest_memory_budget_bytes > 0);
  FUZZ_CHECK(!o.proc_root.empty() && o.proc_root[0] == '/');
  FUZZ_CHECK(o.min_bytes >= 0);
  FUZZ_CHECK(o.min_fraction >= 0 && o.min_fraction <= 1);
  FUZZ_CHECK(o.stats_period_seconds >= 1 && o.stats_period_seconds <= 3600);
  FUZZ_CHECK(o.stale_after >= absl::Seconds(1) && o.stale_after <= absl::Hours(24));
  FUZZ_CHECK(o.stale_after >= absl::Seconds(2 * o.stats_period_seconds));
}

inline bool SameOptions(const server::Options& a, const server::Options& b) {
  return a.libvirt_uri == b.libvirt_uri && a.grpc_listen == b.grpc_listen &&
         a.metrics_listen == b.metrics_listen && a.policy == b.policy && a.tick == b.tick &&
         a.dry_run == b.dry_run && a.host_reserve_bytes == b.host_reserve_bytes &&
         a.guest_memory_budget_bytes == b.guest_memory_budget_bytes &&
         a.proc_root == b.proc_root && a.min_bytes == b.min_bytes &&
         a.min_fraction == b.min_fraction && a.stats_period_seconds == b.stats_period_seconds &&
         a.stale_after == b.stale_after;
}

// Fills defaults and resolves, checking both outcomes; on success, the config as --check_config
// prints it must read back to the same options (what is shown is what runs).
inline void CheckResolve(const v1::DaemonConfig& config) {
  const v1::DaemonConfig effective = server::WithDefaults(config);
  // (MessageDifferencer, not serialized bytes: a string field may hold invalid UTF-8, which text
  // format accepts and serialization logs about on every call.)
  // NaN is a value text format accepts ("min_fraction: nan", which Resolve refuses by name);
  // it never equals itself, so the idempotence check compares it as equal.
  google::protobuf::util::DefaultFieldComparator nan_equal;
  nan_equal.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_field_comparator(&nan_equal);
  FUZZ_CHECK(differencer.Compare(server::WithDefaults(effective), effective));
  absl::StatusOr<server::Options> options = server::Resolve(effective);
  if (!options.ok()) {
    FUZZ_CHECK(options.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(options.status().message(), "config field \""));
    return;
  }
  CheckOptions(*options);
  absl::StatusOr<v1::DaemonConfig> again = server::ParseConfigText(server::ToText(effective), "printed");
  FUZZ_CHECK(again.ok());
  absl::StatusOr<server::Options> options_again = server::Resolve(*again);
  FUZZ_CHECK(options_again.ok());
  FUZZ_CHECK(SameOptions(*options, *options_again));
}

}  // namespace plimsoll::fuzz

#endif  // PLIMSOLL_FUZZ_CONFIG_FUZZ_UTIL_H_
