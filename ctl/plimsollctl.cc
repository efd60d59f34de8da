// plimsollctl: command-line client of plimsolld's control API.
//   plimsollctl [--server=ADDR] guests [--json]
//   plimsollctl [--server=ADDR] guest NAME|UUID [--json]
//   plimsollctl [--server=ADDR] host [--json]
//   plimsollctl [--server=ADDR] top [--interval=2s] [--count=N]
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ctl/guest_table.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "plimsoll/v1/control.grpc.pb.h"

namespace {

constexpr char kUsage[] = R"(plimsollctl: talk to plimsolld

Usage: plimsollctl [--server=ADDR] COMMAND [ARGS] [--json]

Commands:
  guests            every guest: size, target, actual, cache, reason
  guest NAME|UUID   one guest in full
  host              host budget, pressure and daemon status
  top               a live refreshing guest table (--interval=2s, --count=N to stop after N)

--server: unix:/path or host:port (default $PLIMSOLL_SERVER or unix:/run/plimsoll/plimsolld.sock)
--json:   machine-readable output (proto3 JSON, field names as in the .proto)
)";

int Usage(const std::string& error) {
  std::cerr << "plimsollctl: " << error << "\n\n" << kUsage;
  return 2;
}

template <typename Message>
std::string ToJson(const Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

int RpcError(const std::string& server, const grpc::Status& s) {
  std::cerr << "plimsollctl: ";
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    std::cerr << "cannot reach plimsolld at " << server << ": " << s.error_message()
              << " (is plimsolld running? is --server right?)\n";
    return 3;
  }
  std::cerr << s.error_message() << "\n";
  return s.error_code() == grpc::StatusCode::NOT_FOUND ? 4 : 1;
}

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return ctx;
}

int TerminalWidth() {
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env_server = std::getenv("PLIMSOLL_SERVER");
  std::string server = env_server && *env_server ? env_server : "unix:/run/plimsoll/plimsolld.sock";
  bool json = false;
  absl::Duration interval = absl::Seconds(2);
  int64_t count = 0;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "help") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (absl::StartsWith(arg, "--server=")) {
      server = arg.substr(9);
    } else if (absl::StartsWith(arg, "--interval=")) {
      if (!absl::ParseDuration(arg.substr(11), &interval) || interval <= absl::ZeroDuration()) {
        return Usage("--interval wants a positive duration such as 2s");
      }
    } else if (absl::StartsWith(arg, "--count=")) {
      if (!absl::SimpleAtoi(arg.substr(8), &count) || count < 0) return Usage("--count wants a number >= 0");
    } else if (absl::StartsWith(arg, "--")) {
      return Usage("unknown flag " + arg);
    } else {
      positional.push_back(arg);
    }
  }
  if (positional.empty()) return Usage("no command given");
  const std::string command = positional[0];

  auto channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  auto stub = plimsoll::v1::Control::NewStub(channel);

  if (command == "guests") {
    plimsoll::v1::ListGuestsResponse view;
    grpc::Status s = stub->ListGuests(Context().get(), {}, &view);
    if (!s.ok()) return RpcError(server, s);
    std::cout << (json ? ToJson(view) + "\n" : plimsoll::ctl::RenderGuestTable(view));
    return 0;
  }
  if (command == "guest") {
    if (positional.size() != 2) return Usage("usage: plimsollctl guest NAME|UUID");
    plimsoll::v1::GetGuestRequest req;
    req.set_guest(positional[1]);
    plimsoll::v1::Guest guest;
    grpc::Status s = stub->GetGuest(Context().get(), req, &guest);
    if (!s.ok()) return RpcError(server, s);
    std::cout << (json ? ToJson(guest) + "\n" : plimsoll::ctl::RenderGuest(guest));
    return 0;
  }
  if (command == "host") {
    plimsoll::v1::HostStatus host;
    grpc::Status s = stub->GetHostStatus(Context().get(), {}, &host);
    if (!s.ok()) return RpcError(server, s);
    std::cout << (json ? ToJson(host) + "\n" : plimsoll::ctl::RenderHost(host));
    return 0;
  }
  if (command == "top") {
    // On a terminal: redraw in place. Otherwise (logs, CI): print each table with a timestamp.
    const bool tty = isatty(STDOUT_FILENO);
    for (int64_t n = 0; count == 0 || n < count; ++n) {
      if (n > 0) absl::SleepFor(interval);
      plimsoll::v1::ListGuestsResponse view;
      grpc::Status s = stub->ListGuests(Context().get(), {}, &view);
      const std::string stamp = absl::FormatTime("%H:%M:%S", absl::Now(), absl::LocalTimeZone());
      std::string body = s.ok() ? plimsoll::ctl::RenderGuestTable(view, tty ? TerminalWidth() - 90 : 0)
                                : "plimsolld unreachable at " + server + ": " + s.error_message() + "\n";
      if (tty) {
        std::cout << "\033[H\033[2J" << "plimsoll top  " << stamp << "  (Ctrl-C to quit)\n" << body << std::flush;
      } else {
        std::cout << "--- " << stamp << "\n" << body << std::flush;
      }
    }
    return 0;
  }
  return Usage("unknown command \"" + command + "\"");
}
