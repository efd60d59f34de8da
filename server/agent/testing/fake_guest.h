// The guest's agent as the daemon-side tests play it: a real gRPC client over the guest's end of
// a connected socket (a virtio-serial channel's QEMU socket, a fake vsock connection), sending
// reports without a proof, since the channel says who the guest is; or over the TCP listener,
// proving each report with the guest's token.
#ifndef PLIMSOLL_SERVER_AGENT_TESTING_FAKE_GUEST_H_
#define PLIMSOLL_SERVER_AGENT_TESTING_FAKE_GUEST_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "grpcpp/create_channel_posix.h"
#include "grpcpp/grpcpp.h"
#include "plimsoll/v1/agent.grpc.pb.h"
#include "server/agent/testing/test_reports.h"

namespace plimsoll::server::agent::testing {

// The guest's agent on its end of the channel: a gRPC client over the connection.
struct FakeGuest {
  using Stream = grpc::ClientReaderWriter<v1::SignedAgentReport, v1::AgentReply>;

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::AgentChannel::Stub> stub;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<Stream> stream;
  std::string nonce;
  std::string uuid;
  std::string token;  // set: each report is proven with it (TCP)
  double seconds = 10;  // the guest's boottime of its next report
  uint64_t sequence = 1;
  bool finished = false;

  ~FakeGuest() { Close(); }
  // Ends the stream and lets go of the channel (gRPC then closes the descriptor).
  void Close() {
    if (stream != nullptr && !finished) {
      context->TryCancel();
      stream->Finish();
    }
    stream.reset();
    stub.reset();
    channel.reset();
  }

  // Takes over `fd` (gRPC owns it) and opens a stream; false when no hello came.
  bool Open(int fd, const std::string& guest_uuid) {
    return OpenOn(grpc::CreateInsecureChannelFromFd("fake-guest", fd), guest_uuid);
  }
  // Dials the TCP listener at `address` on a connection of its own, as agents do, and opens a
  // stream proven with the guest's token; false when no hello came.
  bool OpenTcp(const std::string& address, const std::string& guest_uuid) {
    token = TokenFor(guest_uuid);
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return OpenOn(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args), guest_uuid);
  }
  bool OpenOn(std::shared_ptr<grpc::Channel> on, const std::string& guest_uuid) {
    uuid = guest_uuid;
    channel = std::move(on);
    stub = v1::AgentChannel::NewStub(channel);
    return Restart();
  }
  bool Restart() {
    finished = false;
    context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream = stub->Report(context.get());
    v1::AgentReply hello;
    if (!stream->Read(&hello) || !hello.has_hello()) return false;
    nonce = hello.hello().nonce();
    return true;
  }
  v1::SignedAgentReport Frame(const std::string& claimed_uuid) {
    v1::AgentReport r = MakeReport(claimed_uuid, kBootA, seconds, sequence++);
    seconds += 0.5;
    r.set_stream_nonce(nonce);
    if (!token.empty()) return Sign(r, token);
    v1::SignedAgentReport frame;
    r.SerializeToString(frame.mutable_report());  // no proof: the channel says who this is
    return frame;
  }
  // Sends a report claiming `claimed_uuid` (its own by default); the ack, or nullopt when the
  // stream ended instead.
  std::optional<v1::AgentReportAck> Report(const std::string& claimed_uuid = "") {
    if (!stream->Write(Frame(claimed_uuid.empty() ? uuid : claimed_uuid))) return std::nullopt;
    v1::AgentReply reply;
    if (!stream->Read(&reply) || !reply.has_ack()) return std::nullopt;
    return reply.ack();
  }
  grpc::Status End() {
    stream->WritesDone();
    v1::AgentReply reply;
    while (stream->Read(&reply)) {
    }
    finished = true;
    return stream->Finish();
  }
};

}  // namespace plimsoll::server::agent::testing

#endif  // PLIMSOLL_SERVER_AGENT_TESTING_FAKE_GUEST_H_
