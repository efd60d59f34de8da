#include "server/state/state_store.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string NewDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(base ? base : "/tmp", "/state-XXXXXX");
  return mkdtemp(tmpl.data());
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

void Write(const std::string& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string kHeaderForTest() { return "# a header\n# of two lines\n"; }

// A state file with `body` and a correct checksum line.
std::string WithChecksum(const std::string& body) {
  return absl::StrCat(body, "# plimsoll-checksum crc32c=", absl::StrFormat("%08x", Crc32c(body)),
                      " length=", body.size(), "\n");
}

v1::ControlState Sample() {
  v1::ControlState s;
  auto* o = s.add_guest_overrides();
  o->set_guest_uuid("aaaaaaaa-0000-0000-0000-000000000001");
  o->set_guest_name("web");
  o->set_pin_bytes(1LL << 30);
  o->set_note("pinned for the \"launch\"\nweek");
  s.mutable_host_policy()->set_paused(true);
  s.mutable_host_policy()->set_guest_memory_budget_bytes(8LL << 30);
  return s;
}

TEST(StateFormatTest, RoundTripsAndEndsWithTheChecksumLine) {
  v1::ControlState s = Sample();
  s.set_version(kControlStateVersion);
  const std::string text = SerializeControlState(s);
  EXPECT_THAT(text, StartsWith("# plimsoll control state"));
  EXPECT_THAT(text, HasSubstr("pin_bytes: 1073741824"));
  auto back = ParseControlState(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), s.SerializeAsString());
}

TEST(StateFormatTest, DamageOfEveryKindIsDetected) {
  v1::ControlState s = Sample();
  s.set_version(kControlStateVersion);
  const std::string good = SerializeControlState(s);
  struct Row {
    std::string name, text;
    absl::StatusCode code;
    std::string message;
  };
  std::string flipped = good;
  flipped[good.find("1073741824")] = '2';
  std::string unparsable = absl::StrCat(kHeaderForTest(), "version: 1\nguest_overrides { pin_bytes: }\n");
  const std::vector<Row> rows = {
      {"empty", "", absl::StatusCode::kDataLoss, "the file does not end with a newline"},
      {"cut mid-line", good.substr(0, good.size() / 2), absl::StatusCode::kDataLoss, ""},
      {"cut at a line end", good.substr(0, good.find("host_policy")), absl::StatusCode::kDataLoss,
       "the last line is not the checksum line"},
      {"one byte changed", flipped, absl::StatusCode::kDataLoss, "checksum mismatch"},
      {"lines appended", good + "version: 1\n", absl::StatusCode::kDataLoss, "the last line is not the checksum"},
      {"no parse", WithChecksum(unparsable), absl::StatusCode::kDataLoss, "does not parse: line 4"},
      {"unknown field", WithChecksum("version: 1\nsurprise: 3\n"), absl::StatusCode::kDataLoss,
       "does not parse"},
      {"future version", WithChecksum("version: 2\nsurprise: 3\n"), absl::StatusCode::kFailedPrecondition,
       "version 2 is not one this plimsolld reads (it reads 1)"},
      {"no version", WithChecksum("generation: 3\n"), absl::StatusCode::kFailedPrecondition, "version 0"},
      {"bad checksum line", good.substr(0, good.rfind("crc32c=") + 7) + "xyz length=1\n",
       absl::StatusCode::kDataLoss, "malformed checksum line"},
  };
  for (const Row& r : rows) {
    auto parsed = ParseControlState(r.text);
    EXPECT_EQ(parsed.status().code(), r.code) << r.name << ": " << parsed.status();
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(r.message)) << r.name;
  }
}

TEST(StateStoreTest, MissingFileIsAnEmptyState) {
  FakeClock clock;
  StateStore store(NewDir() + "/state.textproto", &clock);
  auto load = store.Load();
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_FALSE(load->existed);
  EXPECT_TRUE(load->problem.ok());
  EXPECT_EQ(load->state.version(), kControlStateVersion);
  EXPECT_EQ(load->state.generation(), 0u);
  EXPECT_EQ(load->state.guest_overrides_size(), 0);
}

TEST(StateStoreTest, SaveIsAtomicPrivateAndLoadsBackWithGenerations) {
  FakeClock clock;
  const std::string dir = NewDir() + "/sub/dir";  // created on first save
  const std::string path = dir + "/state.textproto";
  {
    StateStore store(path, &clock);
    auto w1 = store.Save(Sample());
    ASSERT_TRUE(w1.ok()) << w1.status();
    EXPECT_EQ(w1->generation(), 1u);
    EXPECT_EQ(w1->written_unix_micros(), absl::ToUnixMicros(clock.Now()));
    auto w2 = store.Save(Sample());
    ASSERT_TRUE(w2.ok());
    EXPECT_EQ(w2->generation(), 2u);
  }
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  EXPECT_EQ(Files(dir), std::vector<std::string>{"state.textproto"});  // no temp file left
  StateStore again(path, &clock);
  auto load = again.Load();
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_TRUE(load->existed);
  EXPECT_TRUE(load->problem.ok());
  EXPECT_EQ(load->state.generation(), 2u);
  EXPECT_EQ(load->state.guest_overrides(0).pin_bytes(), 1LL << 30);
  EXPECT_TRUE(load->state.host_policy().paused());
  // Generations continue after a restart.
  EXPECT_EQ(again.Save(load->state)->generation(), 3u);
}

TEST(StateStoreTest, CorruptFileIsSetAsideReportedAndNeverOverwritten) {
  FakeClock clock(absl::FromUnixSeconds(1704067200));  // 2024-01-01T00:00:00Z
  const std::string dir = NewDir();
  const std::string path = dir + "/state.textproto";
  StateStore store(path, &clock);
  ASSERT_TRUE(store.Save(Sample()).ok());
  const std::string good = Read(path);
  const std::string damaged = good.substr(0, good.size() - 10);
  Write(path, damaged);

  auto load = store.Load();
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_TRUE(load->existed);
  EXPECT_EQ(load->problem.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(load->set_aside_path, path + ".corrupt-20240101T000000Z");
  EXPECT_THAT(std::string(load->problem.message()), HasSubstr(path));
  EXPECT_THAT(std::string(load->problem.message()), HasSubstr(load->set_aside_path));
  EXPECT_EQ(load->state.guest_overrides_size(), 0);
  EXPECT_EQ(Read(load->set_aside_path), damaged);  // kept byte for byte
  EXPECT_FALSE(std::filesystem::exists(path));

  // A second damaged file in the same second gets its own name.
  Write(path, damaged);
  auto second = store.Load();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->set_aside_path, path + ".corrupt-20240101T000000Z-1");
  EXPECT_EQ(Read(path + ".corrupt-20240101T000000Z"), damaged);
}

TEST(StateStoreTest, UnknownVersionIsSetAsideUnderItsOwnName) {
  FakeClock clock(absl::FromUnixSeconds(1704067200));
  const std::string path = NewDir() + "/state.textproto";
  Write(path, WithChecksum("version: 9\nfrom_the_future: true\n"));
  StateStore store(path, &clock);
  auto load = store.Load();
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->problem.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(load->set_aside_path, path + ".unsupported-version-20240101T000000Z");
  EXPECT_THAT(std::string(load->problem.message()), HasSubstr("version 9"));
}

TEST(StateStoreTest, FailedSaveLeavesThePreviousFile) {
  FakeClock clock;
  const std::string dir = NewDir();
  const std::string path = dir + "/state.textproto";
  StateStore store(path, &clock);
  ASSERT_TRUE(store.Save(Sample()).ok());
  const std::string before = Read(path);
  // Make the temp file impossible to create: a directory in its place.
  std::filesystem::create_directory(path + ".tmp");
  auto w = store.Save(v1::ControlState());
  EXPECT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr(path + ".tmp"));
  EXPECT_EQ(Read(path), before);
  std::filesystem::remove(path + ".tmp");
  // The failed write did not use up a generation.
  EXPECT_EQ(store.Save(Sample())->generation(), 2u);
}

// A state whose content says which write it was: n overrides, each noting n.
v1::ControlState Numbered(uint64_t n) {
  v1::ControlState s;
  const int count = static_cast<int>(n % 23) + 1;
  for (int i = 0; i < count; ++i) {
    auto* o = s.add_guest_overrides();
    o->set_guest_uuid(absl::StrCat("aaaaaaaa-0000-0000-0000-", 100000000000 + i));
    o->set_note(absl::StrCat("write=", n, " ", std::string(i * 37 % 200, 'x')));
    o->set_min_bytes(static_cast<int64_t>(n) << 20);
  }
  s.mutable_host_policy()->set_host_reserve_bytes(static_cast<int64_t>(n));
  return s;
}

// Checks that `s` is exactly one of the states Numbered() produced.
void ExpectWholeWrite(const v1::ControlState& s) {
  const uint64_t n = s.host_policy().host_reserve_bytes();
  ASSERT_EQ(s.guest_overrides_size(), static_cast<int>(n % 23) + 1) << "write " << n;
  for (const auto& o : s.guest_overrides()) {
    EXPECT_THAT(o.note(), StartsWith(absl::StrCat("write=", n, " ")));
    EXPECT_EQ(o.min_bytes(), static_cast<int64_t>(n) << 20);
  }
}

// kill -9 during a stream of writes: the file must always load, hold one whole
// write, and never go back to an older one.
TEST(StateStoreCrashTest, SigkillDuringAStreamOfWritesNeverLeavesAnUnusableFile) {
  const std::string dir = NewDir();
  const std::string path = dir + "/state.textproto";
  std::mt19937 rng(12345);
  uint64_t last_generation = 0;
  int kills_mid_stream = 0;
  for (int round = 0; round < 40; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      RealClock clock;
      StateStore store(path, &clock);
      auto load = store.Load();
      if (!load.ok() || !load->problem.ok()) _exit(3);
      for (uint64_t n = load->state.host_policy().host_reserve_bytes() + 1;; ++n) {
        if (!store.Save(Numbered(n)).ok()) _exit(4);
      }
    }
    absl::SleepFor(absl::Microseconds(std::uniform_int_distribution<int>(2000, 40000)(rng)));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited by itself with " << WEXITSTATUS(status);
    ++kills_mid_stream;

    RealClock clock;
    StateStore store(path, &clock);
    auto load = store.Load();
    ASSERT_TRUE(load.ok()) << load.status();
    ASSERT_TRUE(load->problem.ok()) << "round " << round << ": " << load->problem;
    if (!load->existed) continue;  // killed before the first write completed
    ExpectWholeWrite(load->state);
    EXPECT_GE(load->state.generation(), last_generation) << "went back to an older write";
    EXPECT_EQ(load->state.generation(), load->state.host_policy().host_reserve_bytes());
    last_generation = load->state.generation();
  }
  EXPECT_EQ(kills_mid_stream, 40);
  EXPECT_GT(last_generation, 40u) << "the writer hardly wrote; the test proved little";
  for (const std::string& f : Files(dir)) {
    EXPECT_TRUE(f == "state.textproto" || f == "state.textproto.tmp") << f;  // nothing set aside
  }
}

}  // namespace
}  // namespace plimsoll::server
