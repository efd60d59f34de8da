#include "policy/reason_format.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"

namespace plimsoll::policy {

std::string FormatFixed(double value, int decimals) {
  return absl::StrFormat("%.*f", decimals, value);
}

}  // namespace plimsoll::policy
