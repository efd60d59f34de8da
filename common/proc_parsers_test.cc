#include "common/proc_parsers.h"

#include <cstdint>
#include <fstream>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/testing/fake_proc_tree.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

constexpr int64_t kKiB = 1024;

// Reads a file from common/testdata (a Bazel data dependency).
std::string ReadTestdata(const std::string& name) {
  return ::plimsoll::testing::ReadTestdata("common/testdata/" + name);
}

// ---------------------------------------------------------------- meminfo

TEST(ParseMeminfoTest, CapturedHostFile) {
  absl::StatusOr<Meminfo> info = ParseMeminfo(ReadTestdata("meminfo_host.txt"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->Bytes("MemTotal"), Optional(24684092 * kKiB));
  EXPECT_THAT(info->Bytes("MemFree"), Optional(23527832 * kKiB));
  EXPECT_THAT(info->Bytes("MemAvailable"), Optional(24107004 * kKiB));
  EXPECT_THAT(info->Bytes("Buffers"), Optional(6288 * kKiB));
  EXPECT_THAT(info->Bytes("Cached"), Optional(740468 * kKiB));
  EXPECT_THAT(info->Bytes("Hugepagesize"), Optional(2048 * kKiB));
  EXPECT_THAT(info->Bytes("VmallocTotal"), Optional(int64_t{34359738367} * kKiB));
  // Unitless lines are counts, kept apart from sizes.
  EXPECT_THAT(info->Count("HugePages_Total"), Optional(int64_t{0}));
  EXPECT_EQ(info->Bytes("HugePages_Total"), std::nullopt);
  EXPECT_EQ(info->Count("MemTotal"), std::nullopt);
  EXPECT_EQ(info->counts.size(), 4u);
  EXPECT_EQ(info->bytes.size() + info->counts.size(), 54u);  // every line of the file
  EXPECT_EQ(info->Bytes("NoSuchField"), std::nullopt);
}

TEST(ParseMeminfoTest, NamesWithParenthesesAndTabs) {
  absl::StatusOr<Meminfo> info =
      ParseMeminfo("MemTotal:\t1000 kB\nActive(file):  12 kB\n\n   \nHugePages_Free: 7\n");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->Bytes("MemTotal"), Optional(1000 * kKiB));
  EXPECT_THAT(info->Bytes("Active(file)"), Optional(12 * kKiB));
  EXPECT_THAT(info->Count("HugePages_Free"), Optional(int64_t{7}));
}

TEST(ParseMeminfoTest, LargestSizeThatFitsInt64) {
  const int64_t max_kb = std::numeric_limits<int64_t>::max() / 1024;
  absl::StatusOr<Meminfo> info = ParseMeminfo(absl::StrCat("MemTotal: ", max_kb, " kB\n"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->Bytes("MemTotal"), Optional(max_kb * 1024));
}

struct BadInput {
  const char* label;
  const char* text;
  const char* message;  // a substring of the error
};

// gtest prints a failing row by its label instead of its bytes.
void PrintTo(const BadInput& input, std::ostream* os) { *os << input.label; }

class ParseMeminfoErrorTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(ParseMeminfoErrorTest, IsInvalidArgumentNamingTheProblem) {
  absl::StatusOr<Meminfo> info = ParseMeminfo(GetParam().text);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseMeminfoErrorTest,
    ::testing::Values(
        BadInput{"empty", "", "no MemTotal line"},
        BadInput{"blank", "\n\n", "no MemTotal line"},
        BadInput{"no_memtotal", "MemFree: 1 kB\n", "no MemTotal line"},
        BadInput{"memtotal_unitless", "MemFree: 1 kB\nMemTotal: 5\n",
                 "line 2: MemTotal has no kB unit"},
        BadInput{"no_colon", "MemTotal: 1 kB\nMemFree 1 kB\n", "line 2: no ':'"},
        BadInput{"empty_name", "MemTotal: 1 kB\n: 1 kB\n", "line 2: bad field name"},
        BadInput{"space_in_name", "MemTotal: 1 kB\n Mem Free: 1 kB\n", "line 2: bad field name"},
        BadInput{"control_char_name", "MemTotal: 1 kB\nMem\x01: 1 kB\n", "line 2: bad field name"},
        BadInput{"no_value", "MemTotal: 1 kB\nMemFree:\n", "line 2: no value"},
        BadInput{"negative", "MemTotal: -1 kB\n", "line 1: value is not a decimal"},
        BadInput{"plus_sign", "MemTotal: +1 kB\n", "line 1: value is not a decimal"},
        BadInput{"hex", "MemTotal: 0x10 kB\n", "line 1: value is not a decimal"},
        BadInput{"float", "MemTotal: 1.5 kB\n", "line 1: value is not a decimal"},
        BadInput{"bad_unit", "MemTotal: 1 MB\n", "line 1: unit is not kB"},
        BadInput{"trailing", "MemTotal: 1 kB extra\n", "line 1: unexpected text"},
        BadInput{"duplicate", "MemTotal: 1 kB\nMemTotal: 2 kB\n", "line 2: duplicate field"},
        BadInput{"duplicate_across_units", "MemTotal: 1 kB\nX: 2\nX: 2 kB\n",
                 "line 3: duplicate field"},
        BadInput{"above_uint64", "MemTotal: 18446744073709551616 kB\n",
                 "line 1: value is not a decimal number within uint64"},
        BadInput{"bytes_above_int64", "MemTotal: 9007199254740992 kB\n",
                 "line 1: size in bytes does not fit int64"},
        BadInput{"count_above_int64", "MemTotal: 1 kB\nHugePages_Total: 9223372036854775808\n",
                 "line 2: value does not fit int64"},
        BadInput{"no_final_newline", "MemTotal: 1 kB\nMemFree: 12", "line 2: truncated"}),
    [](const ::testing::TestParamInfo<BadInput>& info) { return info.param.label; });

TEST(ParseMeminfoTest, TruncatedCapture) {
  absl::StatusOr<Meminfo> info = ParseMeminfo(ReadTestdata("meminfo_truncated.txt"));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("line 5: truncated"));
}

TEST(ParseMeminfoTest, OverflowCaptures) {
  absl::StatusOr<Meminfo> u64 = ParseMeminfo(ReadTestdata("meminfo_overflow_u64.txt"));
  ASSERT_FALSE(u64.ok());
  EXPECT_THAT(u64.status().message(), HasSubstr("line 36: value is not a decimal number"));
  absl::StatusOr<Meminfo> bytes = ParseMeminfo(ReadTestdata("meminfo_overflow_bytes.txt"));
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("line 36: size in bytes does not fit int64"));
}

TEST(ParseMeminfoTest, ErrorQuotesOnlyAPrefixOfAHostileLine) {
  const std::string hostile = "MemTotal: 1 kB\n" + std::string(100000, 'x') + "\n";
  absl::StatusOr<Meminfo> info = ParseMeminfo(hostile);
  ASSERT_FALSE(info.ok());
  EXPECT_LT(info.status().message().size(), 200u);
  EXPECT_THAT(info.status().message(), HasSubstr("..."));
}

TEST(ParseMeminfoTest, RefusesTextAboveTheLimit) {
  std::string big = "MemTotal: 1 kB\n";
  big.append(kMaxProcTextBytes, '\n');
  absl::StatusOr<Meminfo> info = ParseMeminfo(big);
  ASSERT_FALSE(info.ok());
  EXPECT_THAT(info.status().message(), HasSubstr("exceeds the limit"));
}

TEST(ParseMeminfoTest, BinaryGarbageIsAnErrorNotACrash) {
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage.push_back(static_cast<char>((i * 131 + 7) & 0xff));
  garbage.push_back('\n');
  EXPECT_FALSE(ParseMeminfo(garbage).ok());
  EXPECT_FALSE(ParseMeminfo(std::string("\0\0\0\n", 4)).ok());
}

// ---------------------------------------------------------------- vmstat

TEST(ParseVmstatTest, CapturedHostFile) {
  absl::StatusOr<Vmstat> vmstat = ParseVmstat(ReadTestdata("vmstat_host.txt"));
  ASSERT_TRUE(vmstat.ok()) << vmstat.status();
  EXPECT_EQ(vmstat->values.size(), 192u);
  EXPECT_THAT(vmstat->Get("nr_free_pages"), Optional(uint64_t{1208601}));
  EXPECT_THAT(vmstat->Get("workingset_refault_file"), Optional(uint64_t{73736}));
  EXPECT_THAT(vmstat->Get("pgmajfault"), Optional(uint64_t{1153}));
  EXPECT_THAT(vmstat->Get("balloon_inflate"), Optional(uint64_t{0}));
  EXPECT_EQ(vmstat->Get("no_such_counter"), std::nullopt);
}

TEST(ParseVmstatTest, FullUint64Range) {
  absl::StatusOr<Vmstat> vmstat = ParseVmstat("pgfault 18446744073709551615\n");
  ASSERT_TRUE(vmstat.ok()) << vmstat.status();
  EXPECT_THAT(vmstat->Get("pgfault"), Optional(std::numeric_limits<uint64_t>::max()));
}

class ParseVmstatErrorTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(ParseVmstatErrorTest, IsInvalidArgumentNamingTheProblem) {
  absl::StatusOr<Vmstat> vmstat = ParseVmstat(GetParam().text);
  ASSERT_FALSE(vmstat.ok());
  EXPECT_EQ(vmstat.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(vmstat.status().message(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Table, ParseVmstatErrorTest,
    ::testing::Values(
        BadInput{"empty", "", "no counters"}, BadInput{"blank", " \n", "no counters"},
        BadInput{"no_value", "pgfault 1\npgmajfault\n", "line 2: no value"},
        BadInput{"three_fields", "pgfault 1 2\n", "line 1: unexpected text"},
        BadInput{"negative", "pgfault -1\n", "line 1: value is not a decimal"},
        BadInput{"above_uint64", "pgfault 18446744073709551616\n",
                 "line 1: value is not a decimal number within uint64"},
        BadInput{"colon_in_name", "pg:fault 1\n", "line 1: bad counter name"},
        BadInput{"duplicate", "pgfault 1\npgfault 2\n", "line 2: duplicate counter"},
        BadInput{"no_final_newline", "pgfault 1\npgmajfault 3", "line 2: truncated"}),
    [](const ::testing::TestParamInfo<BadInput>& info) { return info.param.label; });

TEST(ParseVmstatTest, OverflowCapture) {
  absl::StatusOr<Vmstat> vmstat = ParseVmstat(ReadTestdata("vmstat_overflow.txt"));
  ASSERT_FALSE(vmstat.ok());
  EXPECT_THAT(vmstat.status().message(), HasSubstr("line 96: value is not a decimal number"));
}

// ---------------------------------------------------------------- PSI

TEST(ParsePsiTest, CapturedIdleHost) {
  absl::StatusOr<Psi> psi = ParsePsi(ReadTestdata("pressure_memory_host.txt"));
  ASSERT_TRUE(psi.ok()) << psi.status();
  ASSERT_TRUE(psi->some.has_value());
  ASSERT_TRUE(psi->full.has_value());
  EXPECT_EQ(psi->some->avg10, 0.0);
  EXPECT_EQ(psi->full->total_us, 0u);
}

TEST(ParsePsiTest, CapturedCpuFile) {
  absl::StatusOr<Psi> psi = ParsePsi(ReadTestdata("pressure_cpu_host.txt"));
  ASSERT_TRUE(psi.ok()) << psi.status();
  ASSERT_TRUE(psi->some.has_value());
  EXPECT_GT(psi->some->total_us, 0u);
}

TEST(ParsePsiTest, BusyHost) {
  absl::StatusOr<Psi> psi = ParsePsi(ReadTestdata("pressure_memory_busy.txt"));
  ASSERT_TRUE(psi.ok()) << psi.status();
  ASSERT_TRUE(psi->some.has_value());
  ASSERT_TRUE(psi->full.has_value());
  EXPECT_DOUBLE_EQ(psi->some->avg10, 12.5);
  EXPECT_DOUBLE_EQ(psi->some->avg60, 3.07);
  EXPECT_DOUBLE_EQ(psi->some->avg300, 0.91);
  EXPECT_EQ(psi->some->total_us, 48213377u);
  EXPECT_DOUBLE_EQ(psi->full->avg10, 4.2);
  EXPECT_EQ(psi->full->total_us, 16279004u);
}

TEST(ParsePsiTest, OldKernelWithoutFullLine) {
  absl::StatusOr<Psi> psi = ParsePsi(ReadTestdata("pressure_some_only.txt"));
  ASSERT_TRUE(psi.ok()) << psi.status();
  EXPECT_TRUE(psi->some.has_value());
  EXPECT_FALSE(psi->full.has_value());
}

TEST(ParsePsiTest, EmptyTextHasNeitherLine) {
  for (const char* text : {"", "\n", "  \n\n"}) {
    absl::StatusOr<Psi> psi = ParsePsi(text);
    ASSERT_TRUE(psi.ok()) << psi.status();
    EXPECT_FALSE(psi->some.has_value());
    EXPECT_FALSE(psi->full.has_value());
  }
}

TEST(ParsePsiTest, FullOnlyAndAnyOrderOfKeysAndUnknownKeys) {
  absl::StatusOr<Psi> psi =
      ParsePsi("full total=5 avg300=0.10 future=abc avg60=100.00 avg10=7\n");
  ASSERT_TRUE(psi.ok()) << psi.status();
  EXPECT_FALSE(psi->some.has_value());
  ASSERT_TRUE(psi->full.has_value());
  EXPECT_DOUBLE_EQ(psi->full->avg10, 7.0);
  EXPECT_DOUBLE_EQ(psi->full->avg60, 100.0);
  EXPECT_DOUBLE_EQ(psi->full->avg300, 0.1);
  EXPECT_EQ(psi->full->total_us, 5u);
}

TEST(ParsePsiTest, TruncatedCapture) {
  absl::StatusOr<Psi> psi = ParsePsi(ReadTestdata("pressure_truncated.txt"));
  ASSERT_FALSE(psi.ok());
  EXPECT_THAT(psi.status().message(), HasSubstr("line 2: truncated"));
}

class ParsePsiErrorTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(ParsePsiErrorTest, IsInvalidArgumentNamingTheProblem) {
  absl::StatusOr<Psi> psi = ParsePsi(GetParam().text);
  ASSERT_FALSE(psi.ok());
  EXPECT_EQ(psi.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(psi.status().message(), HasSubstr(GetParam().message));
}

constexpr char kSome[] = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";

INSTANTIATE_TEST_SUITE_P(
    Table, ParsePsiErrorTest,
    ::testing::Values(
        BadInput{"unknown_kind", "most avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
                 "line 1: line is neither"},
        BadInput{"repeated_line", "some avg10=0 avg60=0 avg300=0 total=0\n"
                                  "some avg10=0 avg60=0 avg300=0 total=0\n",
                 "line 2: repeated line"},
        BadInput{"missing_total", "some avg10=0.00 avg60=0.00 avg300=0.00\n",
                 "line 1: missing one of"},
        BadInput{"kind_only", "full\n", "line 1: missing one of"},
        BadInput{"repeated_key", "some avg10=1 avg10=2 avg60=0 avg300=0 total=0\n",
                 "line 1: repeated key"},
        BadInput{"no_equals", "some avg10 avg60=0 avg300=0 total=0\n", "line 1: field is not"},
        BadInput{"empty_key", "some =1 avg10=0 avg60=0 avg300=0 total=0\n",
                 "line 1: field is not"},
        BadInput{"avg_empty", "some avg10= avg60=0 avg300=0 total=0\n", "line 1: average"},
        BadInput{"avg_above_100", "some avg10=100.01 avg60=0 avg300=0 total=0\n",
                 "line 1: average"},
        BadInput{"avg_negative", "some avg10=-1.00 avg60=0 avg300=0 total=0\n",
                 "line 1: average"},
        BadInput{"avg_nan", "some avg10=nan avg60=0 avg300=0 total=0\n", "line 1: average"},
        BadInput{"avg_inf", "some avg10=inf avg60=0 avg300=0 total=0\n", "line 1: average"},
        BadInput{"avg_exponent", "some avg10=1e1 avg60=0 avg300=0 total=0\n", "line 1: average"},
        BadInput{"avg_bare_dot", "some avg10=1. avg60=0 avg300=0 total=0\n", "line 1: average"},
        BadInput{"avg_huge", "some avg10=0000000000000000000001 avg60=0 avg300=0 total=0\n",
                 "line 1: average"},
        BadInput{"total_above_uint64",
                 "some avg10=0 avg60=0 avg300=0 total=18446744073709551616\n",
                 "line 1: total is not"},
        BadInput{"total_float", "some avg10=0 avg60=0 avg300=0 total=1.5\n", "line 1: total"},
        BadInput{"garbage_after_some", "some avg10=0 avg60=0 avg300=0 total=0\nxyz\n",
                 "line 2: line is neither"}),
    [](const ::testing::TestParamInfo<BadInput>& info) { return info.param.label; });

TEST(ParsePsiTest, SomeThenGarbageStillReportsTheLine) {
  absl::StatusOr<Psi> psi = ParsePsi(absl::StrCat(kSome, "full avg10=0.00 avg60=0.00"));
  ASSERT_FALSE(psi.ok());
  EXPECT_THAT(psi.status().message(), HasSubstr("line 2: truncated"));
}

}  // namespace
}  // namespace plimsoll
