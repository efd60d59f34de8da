#include "server/hypervisor/balloon_device_reads.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace plimsoll::hypervisor {
namespace {

// A domain whose every read fails is read at listings 1, 2, 4, 8, ... (waits of 1, 2, 4, ...
// listings), never more than max_backoff_listings apart.
TEST(BalloonDeviceReadsTest, AFailingDomainBacksOffDoublingToTheCap) {
  BalloonDeviceReads reads({/*reads_per_listing=*/10, /*max_backoff_listings=*/8});
  std::vector<int> read_at;
  std::vector<int> waits;
  for (int listing = 1; listing <= 40; ++listing) {
    reads.BeginListing();
    const BalloonDeviceReads::Plan plan = reads.Next("u1", 7);
    EXPECT_EQ(plan.known, std::nullopt) << listing;
    if (!plan.read) continue;
    read_at.push_back(listing);
    bool first = false;
    waits.push_back(reads.Failed("u1", 7, &first));
    EXPECT_EQ(first, read_at.size() == 1) << listing;
  }
  EXPECT_EQ(read_at, (std::vector<int>{1, 2, 4, 8, 16, 24, 32, 40}));
  EXPECT_EQ(waits, (std::vector<int>{1, 2, 4, 8, 8, 8, 8, 8}));
}

TEST(BalloonDeviceReadsTest, AReadRunIsNotReadAgainAndAFailedOneIsOnceItSucceeds) {
  BalloonDeviceReads reads;
  reads.BeginListing();
  ASSERT_TRUE(reads.Next("u1", 7).read);
  bool first = false;
  EXPECT_EQ(reads.Failed("u1", 7, &first), 1);
  EXPECT_TRUE(first);
  reads.BeginListing();
  ASSERT_TRUE(reads.Next("u1", 7).read);  // due again after one listing
  reads.Read("u1", 7, true);
  for (int i = 0; i < 5; ++i) {
    reads.BeginListing();
    const BalloonDeviceReads::Plan plan = reads.Next("u1", 7);
    EXPECT_FALSE(plan.read);
    EXPECT_EQ(plan.known, std::optional<bool>(true));
  }
  // A not-understood XML is an answer too: unknown, and not read again in this run.
  reads.BeginListing();
  ASSERT_TRUE(reads.Next("u2", 3).read);
  reads.Read("u2", 3, std::nullopt);
  reads.BeginListing();
  EXPECT_FALSE(reads.Next("u2", 3).read);
}

// A restarted domain (another id) is read again at once: the new run may have another device,
// and its predecessor's failures do not delay it.
TEST(BalloonDeviceReadsTest, ANewRunIsReadAtOnce) {
  BalloonDeviceReads reads;
  reads.BeginListing();
  ASSERT_TRUE(reads.Next("u1", 7).read);
  reads.Read("u1", 7, false);
  reads.BeginListing();
  BalloonDeviceReads::Plan plan = reads.Next("u1", 8);
  EXPECT_TRUE(plan.read);
  EXPECT_EQ(plan.known, std::nullopt) << "the old run's answer is not the new run's";
  reads.Read("u1", 8, true);

  // Failing runs: a restart starts the backoff afresh.
  reads.BeginListing();
  ASSERT_TRUE(reads.Next("u2", 1).read);
  bool first = false;
  reads.Failed("u2", 1, &first);
  reads.BeginListing();
  ASSERT_TRUE(reads.Next("u2", 1).read);
  EXPECT_EQ(reads.Failed("u2", 1, &first), 2);
  EXPECT_FALSE(first);
  reads.BeginListing();
  EXPECT_FALSE(reads.Next("u2", 1).read) << "backing off";
  ASSERT_TRUE(reads.Next("u2", 2).read) << "a new run is not";
  EXPECT_EQ(reads.Failed("u2", 2, &first), 1);
  EXPECT_TRUE(first);
}

// 10 domains, 3 reads a listing: the first listing reads 3 and leaves 7 unknown; four listings
// read them all, each once.
TEST(BalloonDeviceReadsTest, AListingReadsAtMostItsBudgetAndTheRestFollow) {
  BalloonDeviceReads reads({/*reads_per_listing=*/3, /*max_backoff_listings=*/64});
  std::vector<int> read_per_listing;
  std::vector<int> known_after;
  for (int listing = 0; listing < 5; ++listing) {
    reads.BeginListing();
    int read = 0, known = 0;
    for (int d = 0; d < 10; ++d) {
      const std::string uuid = "u" + std::to_string(d);
      BalloonDeviceReads::Plan plan = reads.Next(uuid, 1);
      if (plan.read) {
        ++read;
        reads.Read(uuid, 1, d % 2 == 0);
        plan.known = d % 2 == 0;
      }
      if (plan.known.has_value()) ++known;
    }
    EXPECT_EQ(reads.reads_left(), 3 - read);
    read_per_listing.push_back(read);
    known_after.push_back(known);
  }
  EXPECT_EQ(read_per_listing, (std::vector<int>{3, 3, 3, 1, 0}));
  EXPECT_EQ(known_after, (std::vector<int>{3, 6, 9, 10, 10}));
}

// Failed runs that are due share the budget; those backing off do not spend it.
TEST(BalloonDeviceReadsTest, BackingOffSpendsNoBudget) {
  BalloonDeviceReads reads({/*reads_per_listing=*/2, /*max_backoff_listings=*/64});
  bool first = false;
  reads.BeginListing();
  ASSERT_TRUE(reads.Next("bad", 1).read);
  reads.Failed("bad", 1, &first);
  reads.BeginListing();
  ASSERT_TRUE(reads.Next("bad", 1).read);
  EXPECT_EQ(reads.Failed("bad", 1, &first), 2);
  reads.BeginListing();
  EXPECT_FALSE(reads.Next("bad", 1).read);
  EXPECT_TRUE(reads.Next("a", 1).read);
  EXPECT_TRUE(reads.Next("b", 1).read);
  EXPECT_FALSE(reads.Next("c", 1).read) << "over the budget";
  EXPECT_EQ(reads.Next("c", 1).known, std::nullopt);
}

TEST(BalloonDeviceReadsTest, ForgetsUnlistedDomains) {
  BalloonDeviceReads reads;
  reads.BeginListing();
  for (const char* uuid : {"a", "b", "c"}) {
    ASSERT_TRUE(reads.Next(uuid, 1).read);
    reads.Read(uuid, 1, true);
  }
  reads.KeepOnly(absl::flat_hash_set<std::string>{"a", "c"});
  EXPECT_EQ(reads.size(), 2u);
  reads.BeginListing();
  EXPECT_TRUE(reads.Next("b", 1).read) << "forgotten: read anew when it is back";
  EXPECT_EQ(reads.Next("a", 1).known, std::optional<bool>(true));
  reads.Clear();
  EXPECT_EQ(reads.size(), 0u);
}

}  // namespace
}  // namespace plimsoll::hypervisor
