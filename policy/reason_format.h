// Number formatting shared by every policy's reasons and summaries, so all decision logs read
// alike: sizes in MiB, percentages and fractions with fixed decimals (house style: key=value
// with numbers).
#ifndef PLIMSOLL_POLICY_REASON_FORMAT_H_
#define PLIMSOLL_POLICY_REASON_FORMAT_H_

#include <cstdint>
#include <string>

namespace plimsoll::policy {

// "1024MiB" for a whole number of MiB, else one decimal: "972.8MiB". Negative sizes keep their
// sign ("-12MiB"), which only a host over its budget produces.
std::string FormatMib(double bytes);
std::string FormatMib(int64_t bytes);

// A ratio with `decimals` fixed decimals: FormatFixed(0.123, 2) == "0.12".
std::string FormatFixed(double value, int decimals);

}  // namespace plimsoll::policy

#endif  // PLIMSOLL_POLICY_REASON_FORMAT_H_
