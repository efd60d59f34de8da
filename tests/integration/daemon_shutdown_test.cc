// plimsolld shutting down while libvirt events keep arriving.
//
// The event callback the daemon registers with its hypervisor points at the control loop, and
// the loop is destroyed before the hypervisor (members die in reverse order; the loop borrows the
// hypervisor). libvirt goes on delivering events until the hypervisor closes its connection, so a
// callback still registered then reaches a freed loop. Under ASan (tools/sanitize.sh runs every
// Bazel test with --config=asan) that is a heap-use-after-free report; in any build the test
// also checks that the daemon's callback was gone before the hypervisor was torn down.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/config/config.h"
#include "server/daemon.h"
#include "server/hypervisor/libvirt_hypervisor.h"
#include "server/hypervisor/testing/test_driver_control.h"

namespace plimsoll {
namespace {

using hypervisor::DomainEvent;

constexpr char kBatch[] = "aaaaaaaa-0000-0000-0000-000000000003";

std::string Runfile(const std::string& rel) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* ws = std::getenv("TEST_WORKSPACE");
  if (srcdir && ws) return absl::StrCat(srcdir, "/", ws, "/", rel);
  return rel;
}

// A short private directory: unix socket paths are limited to 107 bytes.
std::string TestTmp() {
  static const std::string* dir = [] {
    char tmpl[] = "/tmp/plimsoll-shutdown-XXXXXX";
    return new std::string(mkdtemp(tmpl));
  }();
  return *dir;
}

// What the hypervisor saw when the daemon tore it down; outlives the daemon.
struct Probe {
  std::atomic<int> delivered_to_daemon{0};
  std::atomic<bool> daemon_callback_at_teardown{false};
  std::atomic<int> delivered_during_teardown{0};
};

// The daemon's hypervisor: the real LibvirtHypervisor on libvirt's test driver, with a thread
// that stops and starts a domain as long as it lives (each a lifecycle event, delivered on
// libvirt's event thread). Its destructor runs after the daemon destroyed its loop, and before
// the real hypervisor deregisters anything it waits until one more event has been delivered: to
// the daemon's callback, if the daemon left it registered.
class EventStormHypervisor : public hypervisor::Hypervisor {
 public:
  EventStormHypervisor(const std::string& uri, std::shared_ptr<Probe> probe)
      : probe_(std::move(probe)), inner_(std::make_unique<hypervisor::LibvirtHypervisor>(uri, control_.Opener())) {
    SetEventCallback(nullptr);  // counts deliveries from the start
    storm_ = std::thread([this] { Storm(); });
  }

  ~EventStormHypervisor() override {
    probe_->daemon_callback_at_teardown.store(daemon_callback_.load());
    const int seen = delivered_.load();
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (delivered_.load() == seen && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    probe_->delivered_during_teardown.store(delivered_.load() - seen);
    stop_.store(true);
    storm_.join();
    inner_.reset();  // closes the connection: no delivery after this
  }

  absl::Status Connect() override { return inner_->Connect(); }
  bool IsConnected() const override { return inner_->IsConnected(); }
  absl::StatusOr<std::vector<hypervisor::DomainInfo>> ListActiveDomains() override {
    return inner_->ListActiveDomains();
  }
  absl::StatusOr<absl::flat_hash_map<std::string, hypervisor::BalloonStats>> GetBalloonStats(
      const std::vector<std::string>& uuids) override {
    return inner_->GetBalloonStats(uuids);
  }
  absl::Status EnableStats(const std::string& uuid, int period_seconds) override {
    return inner_->EnableStats(uuid, period_seconds);
  }
  absl::Status SetBalloonTarget(const std::string& uuid, int64_t bytes) override {
    return inner_->SetBalloonTarget(uuid, bytes);
  }
  // Keeps a counting callback registered with the real hypervisor, forwarding to `callback`
  // when there is one. LibvirtHypervisor waits for deliveries to the previous one to finish,
  // which is what this promises too.
  void SetEventCallback(std::function<void(const DomainEvent&)> callback) override {
    daemon_callback_.store(callback != nullptr);
    inner_->SetEventCallback([this, callback](const DomainEvent& e) {
      delivered_.fetch_add(1);
      if (callback) {
        callback(e);
        probe_->delivered_to_daemon.fetch_add(1);
      }
    });
  }

 private:
  void Storm() {
    while (!stop_.load() && !inner_->IsConnected()) absl::SleepFor(absl::Milliseconds(1));
    while (!stop_.load()) {
      // Either may fail while the daemon's loop reads the same domain; the events are the point.
      (void)control_.DestroyDomain(kBatch);
      (void)control_.StartDomain(kBatch);
    }
  }

  const std::shared_ptr<Probe> probe_;
  hypervisor::testing::TestDriverControl control_;
  std::unique_ptr<hypervisor::LibvirtHypervisor> inner_;
  std::atomic<bool> daemon_callback_{false};
  std::atomic<int> delivered_{0};
  std::atomic<bool> stop_{false};
  std::thread storm_;
};

server::Options ShutdownOptions(int run) {
  server::Options o = *server::Resolve(server::WithDefaults({}));
  o.libvirt_uri = "test://" + std::filesystem::absolute(Runfile("tests/integration/testdata/host.xml")).string();
  o.grpc_listen = absl::StrCat("unix:", TestTmp(), "/plimsolld-", run, ".sock");
  o.metrics_listen = "";
  o.agent_listen = "";
  o.tick = absl::Milliseconds(100);
  const std::string root = TestTmp() + "/procroot";
  std::filesystem::create_directories(root + "/proc");
  std::ofstream(root + "/proc/meminfo") << "MemTotal: 16777216 kB\nMemFree: 8388608 kB\nMemAvailable: 12582912 kB\n"
                                          "Buffers: 102400 kB\nCached: 2097152 kB\n";
  o.proc_root = root;
  return o;
}

TEST(DaemonShutdownTest, EventsArrivingDuringShutdownNeverReachTheDestroyedLoop) {
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE(absl::StrCat("run ", run));
    auto probe = std::make_shared<Probe>();
    server::DaemonOverrides overrides;
    overrides.hypervisor = std::make_unique<EventStormHypervisor>(ShutdownOptions(run).libvirt_uri, probe);
    auto created = server::Daemon::Create(ShutdownOptions(run), std::move(overrides));
    ASSERT_TRUE(created.ok()) << created.status();
    std::unique_ptr<server::Daemon> daemon = *std::move(created);
    ASSERT_TRUE(daemon->Start().ok());
    // Events reach the running daemon (each wakes its loop) before it is shut down among them.
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while ((probe->delivered_to_daemon.load() < 20 || daemon->loop().ticks() < 2) && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_GE(probe->delivered_to_daemon.load(), 20) << "the storm never reached the daemon";
    daemon.reset();
    EXPECT_FALSE(probe->daemon_callback_at_teardown.load())
        << "the daemon's event callback (which points at its loop) was still registered after the loop was destroyed";
    EXPECT_GE(probe->delivered_during_teardown.load(), 1)
        << "no event arrived after the loop was gone, so this run proved nothing";
  }
}

}  // namespace
}  // namespace plimsoll
