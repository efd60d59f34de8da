// The one MiB formatter: every size in a decision reason, a log line or a plan reads alike.
#ifndef PLIMSOLL_COMMON_MIB_FORMAT_H_
#define PLIMSOLL_COMMON_MIB_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>

namespace plimsoll {

// "1024MiB" for a whole number of MiB, else one decimal: "972.8MiB". Negative sizes keep their
// sign ("-12MiB"), which only a host over its budget produces.
std::string FormatMib(double bytes);
std::string FormatMib(int64_t bytes);
// "-" when absent (a signal the guest did not report), else FormatMib.
std::string FormatMib(const std::optional<int64_t>& bytes);

}  // namespace plimsoll

#endif  // PLIMSOLL_COMMON_MIB_FORMAT_H_
