// Validation and merge rules of the control API's mutating requests: pure
// functions of their arguments (no I/O, no clock), shared by the gRPC service,
// the ControlCore implementation and tests. Every error is INVALID_ARGUMENT
// and starts with the request field it is about ("override.pin_bytes: ...",
// "clear_fields[1]: ..."), except CheckReclaimAllowed's FAILED_PRECONDITION.
#ifndef PLIMSOLL_SERVER_API_CONTROL_VALIDATION_H_
#define PLIMSOLL_SERVER_API_CONTROL_VALIDATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "plimsoll/v1/control.pb.h"

namespace plimsoll::server {

// No guest size (floor, ceiling, pin) may be set below this: under it no
// Linux guest survives, and a typo ("512" for "512M") would kill one.
inline constexpr int64_t kMinGuestSizeBytes = 64LL << 20;
// How far an override (a pin, a lowered min) moves a guest down per tick without `force`: the
// safety envelope's step, max(256 MiB, a quarter of its <memory>), so an override cannot drop a
// guest by gigabytes in one balloon move.
int64_t OverrideStepBytes(int64_t memory_bytes);
// Upper sanity bound of every byte count in a request (1 PiB).
inline constexpr int64_t kMaxRequestBytes = 1LL << 50;
inline constexpr uint32_t kMinShares = 1;
inline constexpr uint32_t kMaxShares = 10000;
inline constexpr uint32_t kDefaultShares = 100;
inline constexpr int32_t kMinPriority = -100;
inline constexpr int32_t kMaxPriority = 100;
inline constexpr size_t kMaxNoteBytes = 256;
inline constexpr double kDefaultReclaimHoldSeconds = 300;
inline constexpr double kMaxReclaimHoldSeconds = 86400;
inline constexpr int kMaxWatchGuests = 1024;

// "1.5 GiB (1610612736)": exact and readable, for error messages.
std::string DescribeBytes(int64_t bytes);

// True for a canonical 8-4-4-4-12 hex UUID (either case).
bool LooksLikeUuid(absl::string_view s);

// The settings of a GuestOverride by field name (min_bytes, max_bytes, shares,
// priority, exclude, pin_bytes, note), in proto order.
const std::vector<std::string>& GuestOverrideSettingNames();
// The settings of a HostPolicy by field name.
const std::vector<std::string>& HostPolicySettingNames();

// True when no setting of the override is set (daemon-filled fields ignored).
bool OverrideIsEmpty(const plimsoll::v1::GuestOverride& o);

// Checks an override on its own: each setting's range and the settings'
// consistency with each other (min <= pin <= max, not exclude with pin).
// `field` prefixes messages ("override"). When `guest` is given, also checks
// the sizes against that guest's <memory> (guest.max_bytes()).
absl::Status ValidateOverride(const plimsoll::v1::GuestOverride& o, absl::string_view field,
                              const plimsoll::v1::Guest* guest = nullptr);

// Request-level checks (the guest's existence is the core's business).
absl::Status ValidateSetGuestPolicy(const plimsoll::v1::SetGuestPolicyRequest& r);
absl::Status ValidateClearGuestPolicy(const plimsoll::v1::ClearGuestPolicyRequest& r);
// `known_policies` empty: policy names are not checked here.
absl::Status ValidateSetHostPolicy(const plimsoll::v1::SetHostPolicyRequest& r,
                                   absl::Span<const std::string> known_policies);
absl::Status ValidateReclaim(const plimsoll::v1::ReclaimRequest& r);
absl::Status ValidateWatch(const plimsoll::v1::WatchRequest& r);

// The override in force after SetGuestPolicy: with `replace`, exactly the
// update's settings; otherwise the stored settings with the update's set ones
// replacing them. Daemon-filled fields are copied from `stored`.
plimsoll::v1::GuestOverride MergeOverride(const plimsoll::v1::GuestOverride& stored,
                                          const plimsoll::v1::GuestOverride& update, bool replace);

// `o` with the named settings cleared; empty `fields` clears every setting.
// Names must have passed ValidateClearGuestPolicy.
plimsoll::v1::GuestOverride ClearOverrideSettings(const plimsoll::v1::GuestOverride& o,
                                                  const std::vector<std::string>& fields);

// The host policy after SetHostPolicy: set fields replace, clear_fields unset.
plimsoll::v1::HostPolicy MergeHostPolicy(const plimsoll::v1::HostPolicy& stored,
                                         const plimsoll::v1::SetHostPolicyRequest& r);

// The hold a Reclaim asked for, with the default filled in.
double ReclaimHoldSeconds(const plimsoll::v1::ReclaimRequest& r);

// FAILED_PRECONDITION when a Reclaim that would move balloons cannot run:
// management paused, or the daemon in dry-run mode. Dry-run reclaims (plans)
// are always allowed.
absl::Status CheckReclaimAllowed(const plimsoll::v1::ReclaimRequest& r, bool paused,
                                 bool daemon_dry_run);

// FAILED_PRECONDITION when `require_full` was asked and the plan falls short.
absl::Status CheckReclaimPlanSufficient(const plimsoll::v1::ReclaimRequest& r,
                                        const plimsoll::v1::ReclaimPlan& plan);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_CONTROL_VALIDATION_H_
