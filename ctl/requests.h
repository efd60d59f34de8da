// plimsollctl's argument handling as pure functions: byte sizes with unit
// suffixes, durations, and the Control requests built from command flags.
// Errors are INVALID_ARGUMENT naming the flag ("--pin: ...").
#ifndef PLIMSOLL_CTL_REQUESTS_H_
#define PLIMSOLL_CTL_REQUESTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "plimsoll/v1/control.pb.h"

namespace plimsoll::ctl {

// "1073741824", "512M", "512MiB", "2G", "1.5GiB", "64k", "1T": binary units
// (K = 1024), case-insensitive, with or without "i" and "B". Fractions are
// rounded down to whole bytes. Must fit in int64 and be >= 0.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// "300", "300s", "5m", "1h30m", "1.5h" -> seconds. A bare number is seconds.
absl::StatusOr<double> ParseSeconds(absl::string_view text);

// Flags of one command: name (without "--") -> values in order. A flag given
// without "=value" has the value "".
using Flags = std::multimap<std::string, std::string>;

// `plimsollctl set NAME --min --max --shares --priority --exclude[=BOOL]
// --pin --note --replace`.
absl::StatusOr<plimsoll::v1::SetGuestPolicyRequest> BuildSetRequest(const std::string& guest, const Flags& flags);

// `plimsollctl clear NAME [--fields=pin,exclude,...]`; short names (min, max,
// pin) and the proto names (min_bytes, ...) both work.
absl::StatusOr<plimsoll::v1::ClearGuestPolicyRequest> BuildClearRequest(const std::string& guest,
                                                                        const Flags& flags);

// `plimsollctl host set --budget --reserve --policy --pause|--resume
// --clear=budget,reserve,policy,paused`.
absl::StatusOr<plimsoll::v1::SetHostPolicyRequest> BuildHostSetRequest(const Flags& flags);

// `plimsollctl reclaim BYTES [--dry-run] [--hold=5m] [--require-full]`.
absl::StatusOr<plimsoll::v1::ReclaimRequest> BuildReclaimRequest(const std::string& bytes, const Flags& flags);

// `plimsollctl watch [--guest=NAME ...] [--kinds=decision,guest,host,override,reclaim,line]
// [--holds] [--snapshot]`.
absl::StatusOr<plimsoll::v1::WatchRequest> BuildWatchRequest(const Flags& flags);

// Flags in `flags` that `allowed` does not list, as an error naming the first.
absl::Status CheckFlags(const Flags& flags, const std::vector<std::string>& allowed, absl::string_view command);

}  // namespace plimsoll::ctl

#endif  // PLIMSOLL_CTL_REQUESTS_H_
