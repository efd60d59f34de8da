// The one-line form of a decision's reason, for tables that must fit a terminal
// (`plimsollctl guests` and `top`). The full reason stays in `plimsollctl guest NAME`, in `--wide`
// tables and in plimsolld's log.
//
// A reason is the policy's part ("pagecache: backoff x=2.10 granted=64MiB -> 1022MiB", and
// its numbers after " | ": "src=agent actual=958MiB floor=480MiB ...") and then the loop's
// notes, each after " | " ("held: stale stats ...", "apply failed ...").
// The short form keeps, in this order while they fit: what was done (the words before the first
// number: "take", "retry churning"), the loop's notes, the numbers that decide a decision (what
// was taken or granted, pressure, stall, refaults, working set, cache, free, floor), the rest,
// and last the target it led to (a table shows that in its own column).
#ifndef PLIMSOLL_CTL_SHORT_REASON_H_
#define PLIMSOLL_CTL_SHORT_REASON_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace plimsoll::ctl {

// At most `width` characters (a piece that does not fit ends the line with "..."); width 0 means
// no limit, and the pieces are still put in the order above.
std::string ShortReason(absl::string_view reason, size_t width);

}  // namespace plimsoll::ctl

#endif  // PLIMSOLL_CTL_SHORT_REASON_H_
