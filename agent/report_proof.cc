#include "agent/report_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace plimsoll::agent {
namespace {

// Domain separation: a token can never be mistaken for a proof, and a future v2 derivation
// cannot collide with v1. The NUL ends the label so "…-v1" || data is unambiguous.
constexpr absl::string_view kTokenLabel("plimsoll-agent-token-v1\0", 24);
constexpr absl::string_view kProofLabel("plimsoll-agent-report-v1\0", 25);

std::string HmacSha256(absl::string_view key, absl::string_view label, absl::string_view data) {
  std::string message;
  message.reserve(label.size() + data.size());
  message.append(label.data(), label.size());
  message.append(data.data(), data.size());
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  // One-shot HMAC cannot fail for SHA-256 with in-memory inputs short of allocation failure;
  // a null return then yields an empty string, which never matches a 32-byte proof.
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out,
           &out_len) == nullptr) {
    return std::string();
  }
  return std::string(reinterpret_cast<const char*>(out), out_len);
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool IsCanonicalUuid(absl::string_view text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> NormalizeUuid(absl::string_view text) {
  std::string uuid = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (!IsCanonicalUuid(uuid)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a UUID (want xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx): \"",
                     absl::CEscape(uuid.substr(0, 64)), "\""));
  }
  return uuid;
}

std::string DeriveGuestToken(absl::string_view host_key, absl::string_view uuid) {
  return HmacSha256(host_key, kTokenLabel, uuid);
}

std::string ComputeProof(absl::string_view token, absl::string_view report_bytes) {
  return HmacSha256(token, kProofLabel, report_bytes);
}

bool ProofMatches(absl::string_view token, absl::string_view report_bytes, absl::string_view proof) {
  if (proof.size() != kProofBytes) return false;
  const std::string expected = ComputeProof(token, report_bytes);
  if (expected.size() != kProofBytes) return false;
  return CRYPTO_memcmp(expected.data(), proof.data(), kProofBytes) == 0;
}

std::string ToHex(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 0xf]);
  }
  return out;
}

absl::StatusOr<std::string> ParseHexSecret(absl::string_view text, size_t min_bytes) {
  text = absl::StripAsciiWhitespace(text);
  if (text.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("hex secret has an odd length (", text.size(), ")"));
  }
  std::string out;
  out.reserve(text.size() / 2);
  for (size_t i = 0; i < text.size(); i += 2) {
    const int hi = HexValue(text[i]);
    const int lo = HexValue(text[i + 1]);
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(absl::StrCat("hex secret has a non-hex character at offset ", i));
    }
    out.push_back(static_cast<char>(hi << 4 | lo));
  }
  if (out.size() < min_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hex secret is ", out.size(), " bytes; at least ", min_bytes, " are required"));
  }
  return out;
}

}  // namespace plimsoll::agent
