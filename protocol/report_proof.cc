#include "protocol/report_proof.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace plimsoll::protocol {
namespace {

// Domain separation: a token can never be mistaken for a proof, and a future v2 derivation
// cannot collide with v1. The NUL ends the label so "…-v1" || data is unambiguous.
constexpr absl::string_view kTokenLabel("plimsoll-agent-token-v1\0", 24);
constexpr absl::string_view kProofLabel("plimsoll-agent-report-v1\0", 25);

// OpenSSL 3's HMAC implementation, looked up once for the process (a lookup takes locks and
// costs as much as hashing a report). Null only when the library cannot provide HMAC at all.
EVP_MAC* HmacAlgorithm() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  return mac;
}

// A context keyed with `key` for HMAC-SHA256, or null on failure (allocation, no provider).
EVP_MAC_CTX* NewKeyedContext(absl::string_view key) {
  if (HmacAlgorithm() == nullptr) return nullptr;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(HmacAlgorithm());
  if (ctx == nullptr) return nullptr;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) != 1) {
    EVP_MAC_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

// Feeds `label` then `data` to a keyed context (one pass, no concatenated copy) and returns the
// MAC. Failures (short of allocation failure they cannot happen for SHA-256 in memory) yield an
// empty string, which never matches a 32-byte proof.
std::string Finish(EVP_MAC_CTX* ctx, absl::string_view label, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t out_len = 0;
  if (ctx == nullptr || EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(label.data()), label.size()) != 1 ||
      EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1 ||
      EVP_MAC_final(ctx, out, &out_len, sizeof(out)) != 1) {
    return std::string();
  }
  return std::string(reinterpret_cast<const char*>(out), out_len);
}

std::string HmacSha256(absl::string_view key, absl::string_view label, absl::string_view data) {
  EVP_MAC_CTX* ctx = NewKeyedContext(key);
  std::string mac = Finish(ctx, label, data);
  EVP_MAC_CTX_free(ctx);
  return mac;
}

bool SameProof(const std::string& expected, absl::string_view proof) {
  if (proof.size() != kProofBytes || expected.size() != kProofBytes) return false;
  return CRYPTO_memcmp(expected.data(), proof.data(), kProofBytes) == 0;
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
  return SameProof(ComputeProof(token, report_bytes), proof);
}

struct ReportProver::State {
  // Keyed once with the token; re-initialised (which restores the keyed state) per report.
  EVP_MAC_CTX* ctx = nullptr;
  ~State() { EVP_MAC_CTX_free(ctx); }
};

ReportProver::ReportProver(absl::string_view token) : state_(std::make_unique<State>()) {
  state_->ctx = NewKeyedContext(token);
}

ReportProver::~ReportProver() = default;

std::string ReportProver::Prove(absl::string_view report_bytes) {
  // Re-initialising with no key keeps the key schedule computed at construction.
  if (state_->ctx == nullptr || EVP_MAC_init(state_->ctx, nullptr, 0, nullptr) != 1) return std::string();
  return Finish(state_->ctx, kProofLabel, report_bytes);
}

bool ReportProver::Matches(absl::string_view report_bytes, absl::string_view proof) {
  if (proof.size() != kProofBytes) return false;
  return SameProof(Prove(report_bytes), proof);
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

}  // namespace plimsoll::protocol
