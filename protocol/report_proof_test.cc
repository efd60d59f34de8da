#include "protocol/report_proof.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::protocol {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kUuid[] = "0f8fad5b-d9cb-469f-a165-70867728950e";

std::string Key() {
  std::string key;
  for (int i = 0; i < 32; ++i) key.push_back(static_cast<char>(i));
  return key;
}

TEST(UuidTest, CanonicalFormOnly) {
  EXPECT_TRUE(IsCanonicalUuid(kUuid));
  EXPECT_FALSE(IsCanonicalUuid("0F8FAD5B-D9CB-469F-A165-70867728950E"));  // upper case
  EXPECT_FALSE(IsCanonicalUuid("0f8fad5bd9cb469fa16570867728950e"));      // no dashes
  EXPECT_FALSE(IsCanonicalUuid("0f8fad5b-d9cb-469f-a165-70867728950"));   // short
  EXPECT_FALSE(IsCanonicalUuid("0f8fad5b-d9cb-469f-a165-70867728950g"));  // not hex
  EXPECT_FALSE(IsCanonicalUuid(""));
}

TEST(UuidTest, NormalizeTrimsAndLowers) {
  EXPECT_EQ(*NormalizeUuid("  0F8FAD5B-D9CB-469F-A165-70867728950E\n"), kUuid);
  EXPECT_FALSE(NormalizeUuid("Not Settable").ok());
}

// Known answers computed independently (Python hmac/hashlib), so the derivation, the labels and
// their NUL terminators can never change by accident: every injected token depends on them.
TEST(ProofTest, KnownAnswers) {
  const std::string token = DeriveGuestToken(Key(), kUuid);
  EXPECT_EQ(ToHex(token), "3267826034102adb59dba5622085007a01d1d1d486250831ed96450eb7ca7df6");
  EXPECT_EQ(ToHex(ComputeProof(token, "hello")),
            "8bfc9ee6388f4df9078f2ff95e68fe52f46b2806ac7444e9bb88227095e8f61e");
}

TEST(ProofTest, TokensDifferPerGuestAndKey) {
  const std::string a = DeriveGuestToken(Key(), kUuid);
  EXPECT_EQ(a.size(), kTokenBytes);
  EXPECT_NE(a, DeriveGuestToken(Key(), "0f8fad5b-d9cb-469f-a165-70867728950f"));
  std::string other_key = Key();
  other_key[0] ^= 1;
  EXPECT_NE(a, DeriveGuestToken(other_key, kUuid));
}

TEST(ProofTest, MatchesOnlyTheExactBytesAndToken) {
  const std::string token = DeriveGuestToken(Key(), kUuid);
  const std::string report = "serialized report bytes";
  const std::string proof = ComputeProof(token, report);
  EXPECT_TRUE(ProofMatches(token, report, proof));
  std::string tampered = report;
  tampered[3] ^= 1;
  EXPECT_FALSE(ProofMatches(token, tampered, proof));
  std::string bad_proof = proof;
  bad_proof[31] ^= 1;
  EXPECT_FALSE(ProofMatches(token, report, bad_proof));
  EXPECT_FALSE(ProofMatches(token, report, proof.substr(0, 31)));
  EXPECT_FALSE(ProofMatches(token, report, ""));
  EXPECT_FALSE(ProofMatches(DeriveGuestToken(Key(), "0f8fad5b-d9cb-469f-a165-70867728950f"), report, proof));
}

// The prepared token must give ComputeProof's answer for every report in a row: a context that
// kept state from the previous report (or lost its key) would fail the second or third one.
TEST(ReportProverTest, SameAnswersAsTheOneShotFunctions) {
  const std::string token = DeriveGuestToken(Key(), kUuid);
  ReportProver prover(token);
  EXPECT_EQ(ToHex(prover.Prove("hello")), "8bfc9ee6388f4df9078f2ff95e68fe52f46b2806ac7444e9bb88227095e8f61e");
  const std::string reports[] = {"", "a", std::string(1000, 'x'), "hello", "serialized report bytes"};
  for (const std::string& report : reports) {
    EXPECT_EQ(prover.Prove(report), ComputeProof(token, report)) << report.size();
    EXPECT_TRUE(prover.Matches(report, ComputeProof(token, report))) << report.size();
  }
  EXPECT_EQ(ToHex(prover.Prove("hello")), "8bfc9ee6388f4df9078f2ff95e68fe52f46b2806ac7444e9bb88227095e8f61e");
}

TEST(ReportProverTest, MatchesOnlyTheExactBytesAndToken) {
  const std::string token = DeriveGuestToken(Key(), kUuid);
  ReportProver prover(token);
  const std::string report = "serialized report bytes";
  const std::string proof = ComputeProof(token, report);
  std::string tampered = report;
  tampered[3] ^= 1;
  EXPECT_FALSE(prover.Matches(tampered, proof));
  std::string bad_proof = proof;
  bad_proof[0] ^= 1;
  EXPECT_FALSE(prover.Matches(report, bad_proof));
  EXPECT_FALSE(prover.Matches(report, proof.substr(0, 31)));
  EXPECT_FALSE(prover.Matches(report, proof + "x"));
  EXPECT_FALSE(prover.Matches(report, ""));
  ReportProver other(DeriveGuestToken(Key(), "0f8fad5b-d9cb-469f-a165-70867728950f"));
  EXPECT_FALSE(other.Matches(report, proof));
  EXPECT_TRUE(prover.Matches(report, proof));  // still keyed after the failures
}

TEST(HexTest, RoundTripAndErrors) {
  EXPECT_EQ(*ParseHexSecret(ToHex(Key()) + "\n", 32), Key());
  EXPECT_EQ(*ParseHexSecret("  ABff00  ", 3), std::string("\xab\xff\x00", 3));
  EXPECT_THAT(ParseHexSecret("abc", 1).status().message(), HasSubstr("odd length"));
  EXPECT_THAT(ParseHexSecret("zz", 1).status().message(), HasSubstr("non-hex"));
  EXPECT_THAT(ParseHexSecret("abcd", 32).status().message(), HasSubstr("at least 32"));
  // The message never echoes the secret.
  EXPECT_THAT(ParseHexSecret("deadbeefzz", 1).status().message(), Not(HasSubstr("deadbeef")));
}

}  // namespace
}  // namespace plimsoll::protocol
