// Number formatting shared by every policy's reasons and summaries, so all decision logs read
// alike: sizes in MiB, percentages and fractions with fixed decimals (house style: key=value
// with numbers).
#ifndef PLIMSOLL_POLICY_REASON_FORMAT_H_
#define PLIMSOLL_POLICY_REASON_FORMAT_H_

#include <cstdint>
#include <string>

#include "common/mib_format.h"  // FormatMib, which every reason uses

namespace plimsoll::policy {

// A ratio with `decimals` fixed decimals: FormatFixed(0.123, 2) == "0.12".
std::string FormatFixed(double value, int decimals);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_REASON_FORMAT_H_
