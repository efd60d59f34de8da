#include "server/agent/agent_store.h"

#include <string>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/agent/testing/test_reports.h"

namespace plimsoll::server::agent {
namespace {

using namespace ::plimsoll::server::agent::testing;  // NOLINT: test helpers
using ::testing::DoubleNear;
using ::testing::Optional;

class AgentStoreTest : public ::testing::Test {
 protected:
  AgentStoreTest() {
    store_.SetKnownGuests({{kVictim, GuestLimits{kGiB}}, {kAttacker, GuestLimits{kGiB}}});
  }

  // Sends a report of `uuid` taken `seconds` after boot, with wall time advanced by `advance`.
  IngestResult Send(const std::string& uuid, const std::string& boot, double seconds,
                    absl::Duration advance = absl::Seconds(5)) {
    clock_.Advance(advance);
    return store_.Ingest(SignAsSelf(MakeReport(uuid, boot, seconds, ++sequence_)));
  }

  FakeClock clock_;
  ReportValidator validator_{TestHostKey()};
  AgentStore store_{&validator_, &clock_};
  uint64_t sequence_ = 0;
};

TEST_F(AgentStoreTest, LatestReportAndRefaultRate) {
  ASSERT_TRUE(Send(kVictim, kBootA, 100).ok());
  std::optional<AgentSignals> s = store_.FreshSignals(kVictim);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->mem_total_bytes, 1000 * kMiB);
  EXPECT_EQ(s->active_file_bytes, 200 * kMiB);
  EXPECT_EQ(s->inactive_file_bytes, 300 * kMiB);
  EXPECT_THAT(s->psi_some_avg10, Optional(2.5));
  EXPECT_THAT(s->psi_some_total_us, Optional(uint64_t{1'000'000}));  // 1% of 100 s
  EXPECT_FALSE(s->refaults_per_second.has_value());  // one sample: no rate yet

  ASSERT_TRUE(Send(kVictim, kBootA, 105).ok());
  s = store_.FreshSignals(kVictim);
  ASSERT_TRUE(s.has_value());
  // MakeReport grows refault_file by 100/s and refault_anon by 10/s of guest time.
  EXPECT_THAT(s->refaults_per_second, Optional(DoubleNear(110, 1e-9)));
  EXPECT_THAT(s->file_refaults_per_second, Optional(DoubleNear(100, 1e-9)));
  EXPECT_THAT(s->major_faults_per_second, Optional(DoubleNear(5, 1e-9)));
  EXPECT_THAT(s->pgscan_per_second, Optional(DoubleNear(300, 1e-9)));
  EXPECT_THAT(s->rate_span_seconds, Optional(DoubleNear(5, 1e-9)));
  EXPECT_EQ(s->reports_accepted, 2u);
  EXPECT_EQ(store_.counters().accepted, 2u);
}

// A report whose reclaim part counts from `since_s` (guest seconds).
v1::AgentReport WithReclaim(v1::AgentReport r, double since_s, uint64_t requested, uint64_t achieved,
                            v1::ReclaimState state = v1::RECLAIM_STATE_ACTIVE) {
  v1::ReclaimReport* rc = r.mutable_reclaim();
  rc->set_state(state);
  rc->set_reason(state == v1::RECLAIM_STATE_ACTIVE ? "step" : "below_keep");
  rc->set_counters_since_boottime_ns(static_cast<int64_t>(since_s * 1e9));
  rc->set_requested_bytes(requested);
  rc->set_achieved_bytes(achieved);
  rc->set_steps(requested > 0 ? 1 : 0);
  rc->set_file_only(true);
  rc->set_keep_bytes(300 * kMiB);
  rc->set_keep_file_bytes(64 * kMiB);
  return r;
}

TEST_F(AgentStoreTest, ReclaimIsStoredAndItsTotalsOutliveAgentsAndBoots) {
  auto send = [&](const std::string& boot, double seconds, double since, uint64_t requested, uint64_t achieved,
                  v1::ReclaimState state = v1::RECLAIM_STATE_ACTIVE) {
    clock_.Advance(absl::Seconds(5));
    return store_.Ingest(SignAsSelf(WithReclaim(MakeReport(kVictim, boot, seconds, ++sequence_), since, requested,
                                                achieved, state)));
  };
  ASSERT_TRUE(send(kBootA, 10, 5, 64 * kMiB, 64 * kMiB).ok());
  std::optional<AgentSignals> s = store_.FreshSignals(kVictim);
  ASSERT_TRUE(s.has_value());
  EXPECT_THAT(s->reclaim_state, Optional(v1::RECLAIM_STATE_ACTIVE));
  EXPECT_EQ(s->reclaim_reason, "step");
  EXPECT_TRUE(s->reclaim_file_only);
  EXPECT_FALSE(s->reclaim_dry_run);
  EXPECT_THAT(s->reclaim_keep_bytes, Optional(uint64_t{300 * kMiB}));
  EXPECT_THAT(s->reclaim_keep_file_bytes, Optional(uint64_t{64 * kMiB}));
  EXPECT_EQ(s->reclaim_requested_total_bytes, 64 * kMiB);
  EXPECT_EQ(s->reclaim_achieved_total_bytes, 64 * kMiB);
  // The same agent goes on: its counters' growth is added.
  ASSERT_TRUE(send(kBootA, 15, 5, 100 * kMiB, 90 * kMiB, v1::RECLAIM_STATE_IDLE).ok());
  s = store_.FreshSignals(kVictim);
  EXPECT_THAT(s->reclaim_state, Optional(v1::RECLAIM_STATE_IDLE));
  EXPECT_EQ(s->reclaim_reason, "below_keep");
  EXPECT_EQ(s->reclaim_requested_total_bytes, 100 * kMiB);
  EXPECT_EQ(s->reclaim_achieved_total_bytes, 90 * kMiB);
  // The agent restarts (counters from zero): its new counters are added whole.
  ASSERT_TRUE(send(kBootA, 30, 20, 10 * kMiB, 10 * kMiB).ok());
  EXPECT_EQ(store_.FreshSignals(kVictim)->reclaim_requested_total_bytes, 110 * kMiB);
  // The guest reboots: likewise.
  ASSERT_TRUE(send(kBootB, 8, 2, 5 * kMiB, 5 * kMiB).ok());
  s = store_.FreshSignals(kVictim);
  EXPECT_EQ(s->reclaim_requested_total_bytes, 115 * kMiB);
  EXPECT_EQ(s->reclaim_achieved_total_bytes, 105 * kMiB);
  // A report without a reclaim part (an older agent): no state, totals kept.
  ASSERT_TRUE(Send(kVictim, kBootB, 20).ok());
  s = store_.FreshSignals(kVictim);
  EXPECT_FALSE(s->reclaim_state.has_value());
  EXPECT_EQ(s->reclaim_requested_total_bytes, 115 * kMiB);
}

TEST_F(AgentStoreTest, CompactionsAreSummedLikeTheClaimsAndCappedOnTheHostsClock) {
  auto send = [&](const std::string& boot, double seconds, double since, uint64_t compactions, uint64_t failed) {
    clock_.Advance(absl::Seconds(5));
    v1::AgentReport r = WithReclaim(MakeReport(kVictim, boot, seconds, ++sequence_), since, 64 * kMiB, 64 * kMiB);
    r.mutable_reclaim()->set_compactions(compactions);
    r.mutable_reclaim()->set_failed_compactions(failed);
    return store_.Ingest(SignAsSelf(std::move(r)));
  };
  ASSERT_TRUE(send(kBootA, 10, 5, 1, 0).ok());
  EXPECT_EQ(store_.Signals(kVictim)->reclaim_compactions_total, 1u);
  // The same series: its growth.
  ASSERT_TRUE(send(kBootA, 15, 5, 3, 1).ok());
  EXPECT_EQ(store_.Signals(kVictim)->reclaim_compactions_total, 3u);
  EXPECT_EQ(store_.Signals(kVictim)->reclaim_failed_compactions_total, 1u);
  // A reboot's new series adds whole, but at most one a host second since the last report (+1).
  ASSERT_TRUE(send(kBootB, 8, 2, 1000000, 1000000).ok());
  const std::optional<AgentSignals> s = store_.Signals(kVictim);
  EXPECT_EQ(s->reclaim_compactions_total, 3u + 6u);
  EXPECT_EQ(s->reclaim_failed_compactions_total, 1u + 6u);
}

TEST_F(AgentStoreTest, AnAgentClaimingHugeReclaimIsRejectedCountedAndChangesNothing) {
  ASSERT_TRUE(store_.Ingest(SignAsSelf(WithReclaim(MakeReport(kVictim, kBootA, 10, ++sequence_), 5, 0, 0))).ok());
  clock_.Advance(absl::Seconds(5));
  // 1 TiB "reclaimed" in 5 s from a 1 GiB guest.
  const IngestResult r = store_.Ingest(
      SignAsSelf(WithReclaim(MakeReport(kVictim, kBootA, 15, ++sequence_), 5, uint64_t{1} << 40, uint64_t{1} << 40)));
  EXPECT_EQ(r.reject, RejectReason::kImplausibleReclaim);
  EXPECT_EQ(store_.counters().rejected_for(RejectReason::kImplausibleReclaim), 1u);
  const std::optional<AgentSignals> s = store_.Signals(kVictim);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->reclaim_requested_total_bytes, 0u);
  EXPECT_EQ(s->reclaim_achieved_total_bytes, 0u);
  EXPECT_EQ(s->last_reject_reason, "implausible_reclaim");
  EXPECT_EQ(s->sequence, 1u);  // the lie did not become the latest report
}

// An agent that names a new boot on every report starts a new series each time, whose first
// counters the validator can only bound by the boottime the agent itself reports. The store adds
// at most what the host's clock allows: the plausibility rate over the host seconds since the
// last report plus one, plus one step (the guest's ceiling).
TEST_F(AgentStoreTest, ANewBootOnEveryReportAddsNoFasterThanTheHostClockAllows) {
  const uint64_t rate = static_cast<uint64_t>(validator_.options().max_reclaim_bytes_per_second);
  const uint64_t huge = uint64_t{200} << 40;  // 200 TiB, within the validator's bound at boottime 1e6 s
  uint64_t expected = 0;
  for (int i = 0; i < 10; ++i) {
    if (i > 0) clock_.Advance(absl::Seconds(5));
    const IngestResult r = store_.Ingest(SignAsSelf(
        WithReclaim(MakeReport(kVictim, i % 2 == 0 ? kBootA : kBootB, 1e6, ++sequence_), 1, huge, huge)));
    ASSERT_TRUE(r.ok()) << i << " " << r.detail;
    // The first report has no host time before it: one second of rate and a step.
    expected += (i == 0 ? rate : 6 * rate) + static_cast<uint64_t>(kGiB);
    const std::optional<AgentSignals> s = store_.Signals(kVictim);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->reclaim_requested_total_bytes, expected) << i;
    EXPECT_EQ(s->reclaim_achieved_total_bytes, expected) << i;
  }
}

// Within one series the validator bounds growth by the guest's clock; a boottime that leaps
// ahead widens that bound, the host's clock does not.
TEST_F(AgentStoreTest, ABoottimeLeapingAheadAddsNoFasterThanTheHostClockAllows) {
  const uint64_t rate = static_cast<uint64_t>(validator_.options().max_reclaim_bytes_per_second);
  ASSERT_TRUE(store_.Ingest(SignAsSelf(WithReclaim(MakeReport(kVictim, kBootA, 10, ++sequence_), 5, 0, 0))).ok());
  clock_.Advance(absl::Seconds(5));
  // 10^6 guest seconds in 5 host seconds, and 100 TiB claimed in them.
  const uint64_t huge = uint64_t{100} << 40;
  const IngestResult r =
      store_.Ingest(SignAsSelf(WithReclaim(MakeReport(kVictim, kBootA, 1e6, ++sequence_), 5, huge, huge)));
  ASSERT_TRUE(r.ok()) << r.detail;
  const std::optional<AgentSignals> s = store_.Signals(kVictim);
  EXPECT_EQ(s->reclaim_requested_total_bytes, 6 * rate + static_cast<uint64_t>(kGiB));
  EXPECT_EQ(s->reclaim_achieved_total_bytes, 6 * rate + static_cast<uint64_t>(kGiB));
}

// Totals saturate instead of wrapping round to small numbers.
TEST_F(AgentStoreTest, ReclaimTotalsSaturate) {
  AgentStoreOptions options;
  options.forget_after = absl::InfiniteDuration();
  AgentStore store(&validator_, &clock_, options);
  store.SetKnownGuests({{kVictim, GuestLimits{kGiB}}});
  // The largest claim a boottime can carry (int64 ns): about 2.4e18 bytes, a new boot each time,
  // 10^10 host seconds apart so the host's clock allows it whole.
  const double boottime_s = 9.2e9;
  const uint64_t claim = uint64_t{2'400'000'000'000'000'000};
  uint64_t previous = 0;
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(absl::Seconds(1e10));
    const IngestResult r = store.Ingest(SignAsSelf(
        WithReclaim(MakeReport(kVictim, i % 2 == 0 ? kBootA : kBootB, boottime_s, ++sequence_), 1, claim, claim)));
    ASSERT_TRUE(r.ok()) << i << " " << r.detail;
    const uint64_t total = store.Signals(kVictim)->reclaim_requested_total_bytes;
    EXPECT_GE(total, previous) << i;  // never wraps
    previous = total;
  }
  EXPECT_EQ(previous, UINT64_MAX);
  EXPECT_EQ(store.Signals(kVictim)->reclaim_achieved_total_bytes, UINT64_MAX);
}

TEST_F(AgentStoreTest, RatesUseGuestTimeNotArrivalTime) {
  // Two reports 10 s apart in the guest arrive 1 s apart (delayed by the network).
  ASSERT_TRUE(Send(kVictim, kBootA, 100).ok());
  ASSERT_TRUE(Send(kVictim, kBootA, 110, absl::Seconds(1)).ok());
  EXPECT_THAT(store_.FreshSignals(kVictim)->file_refaults_per_second, Optional(DoubleNear(100, 1e-9)));
}

TEST_F(AgentStoreTest, SpikeReportsCloseTogetherKeepTheWiderBase) {
  ASSERT_TRUE(Send(kVictim, kBootA, 100).ok());
  ASSERT_TRUE(Send(kVictim, kBootA, 105).ok());
  // A spike 0.2 s later: the rate still spans >= 1 s (back to the 100 s sample).
  ASSERT_TRUE(Send(kVictim, kBootA, 105.2, absl::Milliseconds(200)).ok());
  std::optional<AgentSignals> s = store_.FreshSignals(kVictim);
  ASSERT_TRUE(s.has_value());
  EXPECT_THAT(s->rate_span_seconds, Optional(DoubleNear(5.2, 1e-6)));
}

TEST_F(AgentStoreTest, StaleThenForgotten) {
  ASSERT_TRUE(Send(kVictim, kBootA, 100).ok());
  clock_.Advance(absl::Seconds(19));
  EXPECT_TRUE(store_.FreshSignals(kVictim).has_value());
  clock_.Advance(absl::Seconds(2));  // 21 s > stale_after (20 s)
  EXPECT_FALSE(store_.FreshSignals(kVictim).has_value());
  std::optional<AgentSignals> s = store_.Signals(kVictim);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->fresh);
  EXPECT_NEAR(s->age_seconds, 21, 1e-9);
  clock_.Advance(absl::Minutes(10));
  store_.Expire();
  EXPECT_FALSE(store_.Signals(kVictim).has_value());
}

TEST_F(AgentStoreTest, RebootClearsRatesAndIsCounted) {
  ASSERT_TRUE(Send(kVictim, kBootA, 1000).ok());
  ASSERT_TRUE(Send(kVictim, kBootA, 1005).ok());
  ASSERT_TRUE(store_.FreshSignals(kVictim)->refaults_per_second.has_value());
  ASSERT_TRUE(Send(kVictim, kBootB, 3).ok());  // counters restarted: no rate across boots
  std::optional<AgentSignals> s = store_.FreshSignals(kVictim);
  EXPECT_EQ(s->boot_id, kBootB);
  EXPECT_FALSE(s->refaults_per_second.has_value());
  EXPECT_EQ(store_.counters().reboots, 1u);
  ASSERT_TRUE(Send(kVictim, kBootB, 8).ok());
  EXPECT_THAT(store_.FreshSignals(kVictim)->file_refaults_per_second, Optional(DoubleNear(100, 1e-9)));
}

TEST_F(AgentStoreTest, SpoofingLeavesTheVictimUntouchedAndIsCounted) {
  ASSERT_TRUE(Send(kVictim, kBootA, 100).ok());
  const AgentSignals before = *store_.Signals(kVictim);
  // The attacker claims the victim's uuid with its own (valid, but not the victim's) token.
  v1::AgentReport forged = MakeReport(kVictim, kBootA, 200, 99);
  forged.mutable_meminfo()->set_mem_available_bytes(1);
  clock_.Advance(absl::Seconds(5));
  IngestResult r = store_.Ingest(Sign(forged, TokenFor(kAttacker)));
  EXPECT_EQ(r.reject, RejectReason::kBadProof);
  EXPECT_FALSE(r.authenticated);
  const AgentSignals after = *store_.Signals(kVictim);
  EXPECT_EQ(after.sequence, before.sequence);
  EXPECT_EQ(after.received, before.received);
  EXPECT_EQ(after.mem_available_bytes, before.mem_available_bytes);
  EXPECT_EQ(after.last_reject_reason, "");  // not even blamed on the victim
  EXPECT_EQ(store_.counters().rejected_for(RejectReason::kBadProof), 1u);
  EXPECT_EQ(store_.counters().accepted, 1u);
}

TEST_F(AgentStoreTest, RejectedReportChangesOnlyCountersAndLastReject) {
  ASSERT_TRUE(Send(kVictim, kBootA, 100).ok());
  v1::AgentReport bad = MakeReport(kVictim, kBootA, 105, 2);
  bad.mutable_vmstat()->set_workingset_refault_file(0);
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(store_.Ingest(SignAsSelf(bad)).reject, RejectReason::kCounterBackwards);
  std::optional<AgentSignals> s = store_.Signals(kVictim);
  EXPECT_EQ(s->sequence, 1u);
  EXPECT_EQ(s->last_reject_reason, "counter_backwards");
  EXPECT_EQ(store_.counters().rejected_for(RejectReason::kCounterBackwards), 1u);
  EXPECT_EQ(store_.counters().rejected_total(), 1u);
}

TEST_F(AgentStoreTest, UnknownGuestsGetNoEntry) {
  EXPECT_EQ(Send(kStranger, kBootA, 10).reject, RejectReason::kUnknownGuest);
  EXPECT_FALSE(store_.Signals(kStranger).has_value());
  EXPECT_EQ(store_.counters().rejected_for(RejectReason::kUnknownGuest), 1u);
  // Once the control loop knows it, the same agent is accepted.
  store_.SetKnownGuests({{kVictim, GuestLimits{kGiB}}, {kStranger, GuestLimits{kGiB}}});
  EXPECT_TRUE(Send(kStranger, kBootA, 15).ok());
}

TEST_F(AgentStoreTest, GuestsThatDisappearAreDropped) {
  ASSERT_TRUE(Send(kVictim, kBootA, 10).ok());
  ASSERT_TRUE(Send(kAttacker, kBootA, 10).ok());
  store_.SetKnownGuests({{kAttacker, GuestLimits{kGiB}}});
  EXPECT_FALSE(store_.Signals(kVictim).has_value());
  ASSERT_EQ(store_.AllSignals().size(), 1u);
  EXPECT_EQ(store_.AllSignals()[0].uuid, kAttacker);
}

TEST_F(AgentStoreTest, SizesAreCheckedAgainstEachGuestsOwnMax) {
  store_.SetKnownGuests({{kVictim, GuestLimits{512 * kMiB}}});
  EXPECT_EQ(Send(kVictim, kBootA, 10).reject, RejectReason::kSizeOutOfRange);  // MemTotal 1000 MiB
}

TEST_F(AgentStoreTest, StreamIdentityIsBound) {
  clock_.Advance(absl::Seconds(1));
  IngestResult r = store_.Ingest(SignAsSelf(MakeReport(kAttacker, kBootA, 10)), StreamBinding{kVictim, "", nullptr, ""});
  EXPECT_EQ(r.reject, RejectReason::kStreamIdentityChanged);
  EXPECT_TRUE(r.end_stream);
  EXPECT_FALSE(store_.Signals(kAttacker).has_value());
}

TEST_F(AgentStoreTest, ReportsMadeForAnotherStreamAreReplays) {
  v1::AgentReport recorded = MakeReport(kVictim, kBootA, 10);
  recorded.set_stream_nonce("nonce-of-stream-1");
  const v1::SignedAgentReport frame = SignAsSelf(recorded);  // genuine, captured by a MITM
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(store_.Ingest(frame, StreamBinding{"", "nonce-of-stream-1", nullptr, ""}).ok());
  // Played back on another stream (after a "reboot" would even pass the boottime check).
  clock_.Advance(absl::Seconds(1));
  IngestResult r = store_.Ingest(frame, StreamBinding{"", "nonce-of-stream-2", nullptr, ""});
  EXPECT_EQ(r.reject, RejectReason::kReplay);
  EXPECT_TRUE(r.end_stream);
  EXPECT_EQ(store_.Signals(kVictim)->reports_accepted, 1u);
}

TEST_F(AgentStoreTest, BadProofEndsTheStream) {
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(store_.Ingest(Sign(MakeReport(kVictim, kBootA, 10), TokenFor(kAttacker))).end_stream);
}

// A stream that proved itself keeps its guest's token prepared; every later frame is still
// proved over its own bytes.
TEST_F(AgentStoreTest, AProvenStreamsFramesAreStillEachProved) {
  ProofCache cache;
  StreamBinding stream{"", "", &cache, ""};
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(store_.Ingest(SignAsSelf(MakeReport(kVictim, kBootA, 10, 1)), stream).ok());
  stream.uuid = kVictim;  // as AgentService binds it
  v1::SignedAgentReport forged = SignAsSelf(MakeReport(kVictim, kBootA, 20, 2));
  forged.mutable_proof()->at(0) ^= 1;
  clock_.Advance(absl::Seconds(1));
  IngestResult r = store_.Ingest(forged, stream);
  EXPECT_EQ(r.reject, RejectReason::kBadProof);
  EXPECT_TRUE(r.end_stream);
  EXPECT_EQ(store_.Signals(kVictim)->sequence, 1u);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(store_.Ingest(SignAsSelf(MakeReport(kVictim, kBootA, 30, 3)), stream).ok());
  EXPECT_EQ(store_.Signals(kVictim)->sequence, 3u);
  EXPECT_EQ(store_.Signals(kVictim)->reports_accepted, 2u);
}

TEST_F(AgentStoreTest, ConnectedFollowsStreams) {
  EXPECT_FALSE(store_.IsConnected(kVictim));
  store_.StreamOpened(kVictim);
  store_.StreamOpened(kVictim);  // a reconnect racing the old stream
  store_.StreamClosed(kVictim);
  EXPECT_TRUE(store_.IsConnected(kVictim));
  ASSERT_TRUE(Send(kVictim, kBootA, 10).ok());
  EXPECT_TRUE(store_.Signals(kVictim)->connected);
  store_.StreamClosed(kVictim);
  EXPECT_FALSE(store_.IsConnected(kVictim));
  EXPECT_FALSE(store_.Signals(kVictim)->connected);
}

TEST_F(AgentStoreTest, SpikeIsRecordedAndWakesTheListener) {
  std::vector<std::string> woken;
  store_.SetSpikeListener([&woken](const std::string& uuid) { woken.push_back(uuid); });
  ASSERT_TRUE(Send(kVictim, kBootA, 5).ok());  // a regular report wakes nobody
  v1::AgentReport r = MakeReport(kVictim, kBootA, 10, 2);
  r.set_spike(true);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(store_.Ingest(SignAsSelf(r)).ok());
  std::optional<AgentSignals> s = store_.FreshSignals(kVictim);
  EXPECT_TRUE(s->spike);
  EXPECT_EQ(s->last_spike, clock_.Now());
  EXPECT_EQ(woken, std::vector<std::string>{kVictim});
  // A rejected spike (replayed boottime) wakes nobody.
  clock_.Advance(absl::Seconds(1));
  EXPECT_FALSE(store_.Ingest(SignAsSelf(r)).ok());
  EXPECT_EQ(woken.size(), 1u);
}

// A frame on a domain's own channel (virtio-serial): no proof; the channel is the identity.
TEST_F(AgentStoreTest, ChannelIdentityInsteadOfAProof) {
  StreamBinding attacker_channel;
  attacker_channel.channel_uuid = kAttacker;
  v1::SignedAgentReport own;
  MakeReport(kAttacker, kBootA, 100, 1).SerializeToString(own.mutable_report());
  clock_.Advance(absl::Seconds(5));
  IngestResult ok = store_.Ingest(own, attacker_channel);
  EXPECT_TRUE(ok.ok()) << ok.detail;
  EXPECT_EQ(ok.uuid, kAttacker);
  ASSERT_TRUE(store_.FreshSignals(kAttacker).has_value());

  // The victim's valid proof does not make a report on the attacker's channel the victim's.
  ASSERT_TRUE(Send(kVictim, kBootA, 100).ok());
  const AgentSignals before = *store_.Signals(kVictim);
  clock_.Advance(absl::Seconds(5));
  IngestResult lie = store_.Ingest(SignAsSelf(MakeReport(kVictim, kBootA, 110, 9)), attacker_channel);
  EXPECT_EQ(lie.reject, RejectReason::kChannelIdentityMismatch);
  EXPECT_TRUE(lie.end_stream);
  EXPECT_FALSE(lie.authenticated);
  EXPECT_EQ(store_.counters().rejected_for(RejectReason::kChannelIdentityMismatch), 1u);
  const AgentSignals after = *store_.Signals(kVictim);
  EXPECT_EQ(after.sequence, before.sequence);
  EXPECT_EQ(after.reports_accepted, before.reports_accepted);
  EXPECT_EQ(after.last_reject_reason, "");
  EXPECT_EQ(store_.Signals(kAttacker)->last_reject_reason, "channel_identity_mismatch");

  // Malformed frames on a channel are counted as such and end nothing.
  v1::SignedAgentReport junk;
  junk.set_report("not a report");
  IngestResult bad = store_.Ingest(junk, attacker_channel);
  EXPECT_EQ(bad.reject, RejectReason::kMalformed);
  EXPECT_FALSE(bad.end_stream);
  // A channel of a guest the daemon does not manage is unknown_guest, and creates nothing.
  StreamBinding stranger_channel;
  stranger_channel.channel_uuid = kStranger;
  v1::SignedAgentReport stranger;
  MakeReport(kStranger, kBootA, 100, 1).SerializeToString(stranger.mutable_report());
  EXPECT_EQ(store_.Ingest(stranger, stranger_channel).reject, RejectReason::kUnknownGuest);
  EXPECT_FALSE(store_.Signals(kStranger).has_value());
}

}  // namespace
}  // namespace plimsoll::server::agent
