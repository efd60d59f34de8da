// ConnectionBindings as a table: which peer names are a bound guest's, nobody's, or the TCP
// listener's, and how a later binding of the same descriptor number replaces an earlier one.
#include "server/agent/connection_bindings.h"

#include <string>

#include "gtest/gtest.h"

namespace plimsoll::server::agent {
namespace {

constexpr char kVictim[] = "11111111-1111-1111-1111-111111111111";
constexpr char kAttacker[] = "22222222-2222-2222-2222-222222222222";

ConnectionBinding Binding(Transport transport, const std::string& uuid, uint64_t key = 0) {
  ConnectionBinding b;
  b.transport = transport;
  b.uuid = uuid;
  b.key = key;
  return b;
}

TEST(ConnectionBindingsTest, PeersAreBoundUnboundOrTheNetworks) {
  ConnectionBindings bindings;
  bindings.Bind(7, Binding(Transport::kVirtioSerial, kVictim));
  bindings.Bind(12, Binding(Transport::kVsock, kAttacker, 6));
  const struct {
    std::string peer;
    PeerKind kind;
    std::string uuid;
    Transport transport;
    uint64_t key;
  } rows[] = {
      {"fd:7", PeerKind::kBound, kVictim, Transport::kVirtioSerial, 0},
      {"fd:12", PeerKind::kBound, kAttacker, Transport::kVsock, 6},
      {"fd:8", PeerKind::kUnbound, "", Transport::kVirtioSerial, 0},    // never bound
      {"fd:07", PeerKind::kUnbound, "", Transport::kVirtioSerial, 0},   // not gRPC's spelling of 7
      {"fd:", PeerKind::kUnbound, "", Transport::kVirtioSerial, 0},
      {"ipv4:127.0.0.1:5555", PeerKind::kNetwork, "", Transport::kVirtioSerial, 0},
      {"ipv6:[::1]:5555", PeerKind::kNetwork, "", Transport::kVirtioSerial, 0},
      {"unix:/run/x.sock", PeerKind::kNetwork, "", Transport::kVirtioSerial, 0},
      {"", PeerKind::kNetwork, "", Transport::kVirtioSerial, 0},
  };
  for (const auto& row : rows) {
    const PeerLookup found = bindings.Lookup(row.peer);
    EXPECT_EQ(found.kind, row.kind) << row.peer;
    if (row.kind != PeerKind::kBound) continue;
    EXPECT_EQ(found.binding.uuid, row.uuid) << row.peer;
    EXPECT_EQ(found.binding.transport, row.transport) << row.peer;
    EXPECT_EQ(found.binding.key, row.key) << row.peer;
  }
  EXPECT_EQ(FdPeer(7), "fd:7");
}

TEST(ConnectionBindingsTest, AReusedNumberIsItsNewConnectionsAndAnOldUnbindLeavesIt) {
  ConnectionBindings bindings;
  const uint64_t first = bindings.Bind(7, Binding(Transport::kVirtioSerial, kVictim));
  // gRPC closed descriptor 7 and the number came back for another guest's connection.
  const uint64_t second = bindings.Bind(7, Binding(Transport::kVsock, kAttacker, 6));
  EXPECT_NE(first, second);
  EXPECT_EQ(bindings.Lookup("fd:7").binding.uuid, kAttacker);
  EXPECT_EQ(bindings.Lookup("fd:7").binding.generation, second);
  // The first connection's end arrives late: it must not unbind the second.
  bindings.Unbind(7, first);
  EXPECT_EQ(bindings.Lookup("fd:7").kind, PeerKind::kBound);
  EXPECT_EQ(bindings.Lookup("fd:7").binding.uuid, kAttacker);
  bindings.Unbind(7, second);
  EXPECT_EQ(bindings.Lookup("fd:7").kind, PeerKind::kUnbound);
  EXPECT_EQ(bindings.size(), 0u);
}

TEST(ConnectionBindingsTest, ClearForgetsEverything) {
  ConnectionBindings bindings;
  bindings.Bind(3, Binding(Transport::kVirtioSerial, kVictim));
  bindings.Bind(4, Binding(Transport::kVsock, kAttacker, 5));
  EXPECT_EQ(bindings.size(), 2u);
  bindings.Clear();
  EXPECT_EQ(bindings.Lookup("fd:3").kind, PeerKind::kUnbound);
  EXPECT_EQ(bindings.Lookup("fd:4").kind, PeerKind::kUnbound);
  EXPECT_EQ(bindings.size(), 0u);
}

}  // namespace
}  // namespace plimsoll::server::agent
