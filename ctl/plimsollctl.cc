// plimsollctl: command-line client of plimsolld's control API (docs/api.md).
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "ctl/guest_table.h"
#include "ctl/requests.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "plimsoll/v1/control.grpc.pb.h"

namespace {

constexpr char kUsage[] = R"(plimsollctl: talk to plimsolld

Usage: plimsollctl [GLOBAL FLAGS] COMMAND [ARGS] [FLAGS]

Read commands (all take --json):
  guests                 every guest: size, target, actual, cache, a short reason (--wide: in full)
  guest NAME|UUID        one guest in full, with its override
  host                   host budget, pressure, daemon status, runtime host policy
  line                   the Plimsoll line: how much more guest memory this host offers, and why
  policies               every stored guest override (also of guests not running)
  watch                  stream decisions and changes until Ctrl-C (--json: one JSON object per line)
                         --guest=NAME (repeatable)  --kinds=decision,guest,host,override,reclaim,line
                         --holds (also decisions that hold)  --snapshot (start with every guest)
  top                    a live refreshing guest table (--interval=2s, --count=N to stop after N,
                         --wide: full reasons)

Change commands (need the admin role over TCP):
  set NAME|UUID          set a guest override; only the given settings change
                         --min=SIZE --max=SIZE --pin=SIZE --shares=1..10000 --priority=-100..100
                         --exclude[=false] --note=TEXT --replace (drop settings not given)
                         --force[=false] (pin/min at once, below the guest's envelope floor; needs --note)
  clear NAME|UUID        remove a guest override (--fields=pin,exclude,... to remove only some)
  host set               --budget=SIZE --reserve=SIZE --policy=NAME --pause | --resume
                         --clear=budget,reserve,policy,paused (back to the config file's value)
  reclaim SIZE           take SIZE of guest memory back now and hold it
                         --dry-run (only show the plan)  --hold=5m (default 300s)  --require-full

SIZE: bytes or with a binary unit: 512M, 2G, 1.5GiB, 64k (1K = 1024).

Global flags:
  --server=ADDR  unix:/path or host:port (default $PLIMSOLL_SERVER or unix:/run/plimsoll/plimsolld.sock)
  --ca=FILE --cert=FILE --key=FILE
                 for host:port: the CA that signed the server's certificate, and this client's
                 certificate and key (mutual TLS; default $PLIMSOLL_CA, $PLIMSOLL_CERT, $PLIMSOLL_KEY)
  --timeout=5s   per-call deadline
  --json         machine-readable output (proto3 JSON, field names as in the .proto)
  --wide         tables show each reason in full; otherwise they fit $COLUMNS, the terminal's
                 width, or 120 columns when neither is known

Exit status: 0 ok, 1 refused or failed, 2 usage or invalid request, 3 plimsolld unreachable,
4 no such guest, 5 not allowed (TLS identity or role).
)";

int Usage(const std::string& error) {
  std::cerr << "plimsollctl: " << error << "\n(plimsollctl --help for usage)\n";
  return 2;
}

template <typename Message>
std::string ToJson(const Message& m, bool pretty = true) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

struct Globals {
  std::string server;
  std::string ca, cert, key;
  absl::Duration timeout = absl::Seconds(5);
  bool json = false;
  bool wide = false;
};

int RpcError(const Globals& g, const std::string& what, const grpc::Status& s) {
  std::cerr << "plimsollctl: " << what << ": ";
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      std::cerr << "cannot reach plimsolld at " << g.server << ": " << s.error_message()
                << (absl::StartsWith(g.server, "unix:")
                        ? " (is plimsolld running? is --server right? may this user open the socket?)"
                        : " (is plimsolld running? is --server right? was the server's certificate signed by "
                          "--ca, and was --cert signed by the CA plimsolld trusts?)")
                << "\n";
      return 3;
    case grpc::StatusCode::NOT_FOUND:
      std::cerr << s.error_message() << "\n";
      return 4;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      std::cerr << "not allowed: " << s.error_message() << "\n";
      return 5;
    case grpc::StatusCode::INVALID_ARGUMENT:
      std::cerr << "invalid request: " << s.error_message() << "\n";
      return 2;
    case grpc::StatusCode::UNIMPLEMENTED:
      std::cerr << "this plimsolld does not support it: " << s.error_message() << "\n";
      return 1;
    default:
      std::cerr << s.error_message() << "\n";
      return 1;
  }
}

std::unique_ptr<grpc::ClientContext> Context(const Globals& g) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(g.timeout));
  return ctx;
}

// How wide a table may be: 0 (no limit) with --wide, else $COLUMNS, else the terminal's width,
// else 120 (a pipe or a log: wide enough to read, narrow enough for a mail or a ticket).
size_t TableWidth(bool wide) {
  if (wide) return 0;
  int columns = 0;
  if (const char* env = std::getenv("COLUMNS"); env != nullptr && absl::SimpleAtoi(env, &columns) && columns > 0) {
    return static_cast<size_t>(columns);
  }
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) return w.ws_col;
  return 120;
}

std::string ReadFile(const std::string& path, std::string* error) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) {
    *error = absl::StrCat("cannot read ", path, ": ", strerror(errno));
    return "";
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

// The channel for --server: plain for a unix socket, mutual TLS for host:port.
std::shared_ptr<grpc::Channel> MakeChannel(const Globals& g, std::string* error) {
  if (absl::StartsWith(g.server, "unix:")) return grpc::CreateChannel(g.server, grpc::InsecureChannelCredentials());
  if (g.ca.empty() || g.cert.empty() || g.key.empty()) {
    *error = absl::StrCat("--server=", g.server,
                          " is TCP, which plimsolld only serves with mutual TLS: give --ca, --cert and --key "
                          "(or use a unix: socket on the host)");
    return nullptr;
  }
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadFile(g.ca, error);
  if (!error->empty()) return nullptr;
  o.pem_cert_chain = ReadFile(g.cert, error);
  if (!error->empty()) return nullptr;
  o.pem_private_key = ReadFile(g.key, error);
  if (!error->empty()) return nullptr;
  return grpc::CreateChannel(g.server, grpc::SslCredentials(o));
}

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  Globals g;
  g.server = Env("PLIMSOLL_SERVER", "unix:/run/plimsoll/plimsolld.sock");
  g.ca = Env("PLIMSOLL_CA", "");
  g.cert = Env("PLIMSOLL_CERT", "");
  g.key = Env("PLIMSOLL_KEY", "");
  absl::Duration interval = absl::Seconds(2);
  int64_t count = 0;
  std::vector<std::string> positional;
  plimsoll::ctl::Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "help") {
      std::cout << kUsage;
      return 0;
    }
    if (!absl::StartsWith(arg, "--") || arg == "--") {
      positional.push_back(arg);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (name == "wide") {
      g.wide = true;
    } else if (name == "json") {
      g.json = true;
    } else if (name == "server") {
      g.server = value;
    } else if (name == "ca") {
      g.ca = value;
    } else if (name == "cert") {
      g.cert = value;
    } else if (name == "key") {
      g.key = value;
    } else if (name == "timeout") {
      if (!absl::ParseDuration(value, &g.timeout) || g.timeout <= absl::ZeroDuration()) {
        return Usage("--timeout wants a positive duration such as 5s");
      }
    } else if (name == "interval") {
      if (!absl::ParseDuration(value, &interval) || interval <= absl::ZeroDuration()) {
        return Usage("--interval wants a positive duration such as 2s");
      }
    } else if (name == "count") {
      if (!absl::SimpleAtoi(value, &count) || count < 0) return Usage("--count wants a number >= 0");
    } else {
      flags.emplace(name, value);
    }
  }
  if (positional.empty()) return Usage("no command given");
  const std::string command = positional[0];
  const bool host_set = command == "host" && positional.size() >= 2 && positional[1] == "set";
  // Commands that take no command-specific flags.
  if (command == "guests" || command == "guest" || command == "policies" || command == "top" || command == "line" ||
      (command == "host" && !host_set)) {
    if (absl::Status s = plimsoll::ctl::CheckFlags(flags, {}, command); !s.ok()) return Usage(std::string(s.message()));
  }

  std::string channel_error;
  auto channel = MakeChannel(g, &channel_error);
  if (!channel) return Usage(channel_error);
  auto stub = plimsoll::v1::Control::NewStub(channel);

  if (command == "guests") {
    plimsoll::v1::ListGuestsResponse view;
    grpc::Status s = stub->ListGuests(Context(g).get(), {}, &view);
    if (!s.ok()) return RpcError(g, "guests", s);
    std::cout << (g.json ? ToJson(view) + "\n" : plimsoll::ctl::RenderGuestTable(view, TableWidth(g.wide)));
    return 0;
  }
  if (command == "guest") {
    if (positional.size() != 2) return Usage("usage: plimsollctl guest NAME|UUID");
    plimsoll::v1::GetGuestRequest req;
    req.set_guest(positional[1]);
    plimsoll::v1::Guest guest;
    grpc::Status s = stub->GetGuest(Context(g).get(), req, &guest);
    if (!s.ok()) return RpcError(g, "guest " + positional[1], s);
    std::cout << (g.json ? ToJson(guest) + "\n" : plimsoll::ctl::RenderGuest(guest));
    return 0;
  }
  if (command == "host" && !host_set) {
    if (positional.size() != 1) return Usage("usage: plimsollctl host [--json] | plimsollctl host set ...");
    plimsoll::v1::HostStatus host;
    grpc::Status s = stub->GetHostStatus(Context(g).get(), {}, &host);
    if (!s.ok()) return RpcError(g, "host", s);
    if (g.json) {
      std::cout << ToJson(host) << "\n";
    } else {
      std::cout << plimsoll::ctl::RenderHost(host) << "host policy: " << plimsoll::ctl::RenderHostPolicy(host.host_policy())
                << ", " << host.guest_overrides() << " guest override(s)"
                << (host.state_file().empty() ? "" : ", state in " + host.state_file()) << "\n";
    }
    return 0;
  }
  if (command == "line") {
    if (positional.size() != 1) return Usage("usage: plimsollctl line [--json]");
    plimsoll::v1::HostLine line;
    grpc::Status s = stub->GetHostLine(Context(g).get(), {}, &line);
    if (!s.ok()) return RpcError(g, "line", s);
    std::cout << (g.json ? ToJson(line) + "\n" : plimsoll::ctl::RenderLine(line));
    return 0;
  }
  if (host_set) {
    if (positional.size() != 2) return Usage("usage: plimsollctl host set [--budget=SIZE] ...");
    auto req = plimsoll::ctl::BuildHostSetRequest(flags);
    if (!req.ok()) return Usage(std::string(req.status().message()));
    plimsoll::v1::SetHostPolicyResponse resp;
    grpc::Status s = stub->SetHostPolicy(Context(g).get(), *req, &resp);
    if (!s.ok()) return RpcError(g, "host set", s);
    std::cout << (g.json ? ToJson(resp) + "\n"
                         : "host policy: " + plimsoll::ctl::RenderHostPolicy(resp.policy()) + "\n");
    return 0;
  }
  if (command == "policies") {
    plimsoll::v1::ListGuestPoliciesResponse resp;
    grpc::Status s = stub->ListGuestPolicies(Context(g).get(), {}, &resp);
    if (!s.ok()) return RpcError(g, "policies", s);
    std::cout << (g.json ? ToJson(resp) + "\n"
                         : plimsoll::ctl::RenderOverrides({resp.overrides().begin(), resp.overrides().end()}));
    return 0;
  }
  if (command == "set") {
    if (positional.size() != 2) return Usage("usage: plimsollctl set NAME|UUID --pin=2G ...");
    auto req = plimsoll::ctl::BuildSetRequest(positional[1], flags);
    if (!req.ok()) return Usage(std::string(req.status().message()));
    plimsoll::v1::SetGuestPolicyResponse resp;
    grpc::Status s = stub->SetGuestPolicy(Context(g).get(), *req, &resp);
    if (!s.ok()) return RpcError(g, "set " + positional[1], s);
    std::cout << (g.json ? ToJson(resp) + "\n"
                         : positional[1] + ": " + plimsoll::ctl::RenderOverride(resp.override()) + "\n");
    if (!g.json) {
      for (const std::string& w : resp.warnings()) std::cout << "  note: " << w << "\n";
    }
    return 0;
  }
  if (command == "clear") {
    if (positional.size() != 2) return Usage("usage: plimsollctl clear NAME|UUID [--fields=pin,...]");
    auto req = plimsoll::ctl::BuildClearRequest(positional[1], flags);
    if (!req.ok()) return Usage(std::string(req.status().message()));
    plimsoll::v1::ClearGuestPolicyResponse resp;
    grpc::Status s = stub->ClearGuestPolicy(Context(g).get(), *req, &resp);
    if (!s.ok()) return RpcError(g, "clear " + positional[1], s);
    if (g.json) {
      std::cout << ToJson(resp) << "\n";
    } else if (!resp.existed()) {
      std::cout << positional[1] << ": nothing to clear\n";
    } else {
      std::cout << positional[1] << ": "
                << (resp.has_override() ? "override now " + plimsoll::ctl::RenderOverride(resp.override())
                                        : std::string("override removed"))
                << "\n";
    }
    return 0;
  }
  if (command == "reclaim") {
    if (positional.size() != 2) return Usage("usage: plimsollctl reclaim SIZE [--dry-run] [--hold=5m]");
    auto req = plimsoll::ctl::BuildReclaimRequest(positional[1], flags);
    if (!req.ok()) return Usage(std::string(req.status().message()));
    plimsoll::v1::ReclaimResponse resp;
    grpc::Status s = stub->Reclaim(Context(g).get(), *req, &resp);
    if (!s.ok()) return RpcError(g, "reclaim", s);
    std::cout << (g.json ? ToJson(resp) + "\n" : plimsoll::ctl::RenderPlan(resp.plan()));
    return 0;
  }
  if (command == "watch") {
    if (positional.size() != 1) return Usage("usage: plimsollctl watch [--guest=NAME] [--kinds=...]");
    auto req = plimsoll::ctl::BuildWatchRequest(flags);
    if (!req.ok()) return Usage(std::string(req.status().message()));
    grpc::ClientContext ctx;  // no deadline: runs until Ctrl-C
    auto reader = stub->Watch(&ctx, *req);
    plimsoll::v1::WatchEvent e;
    while (reader->Read(&e)) {
      std::cout << (g.json ? ToJson(e, /*pretty=*/false) + "\n" : plimsoll::ctl::RenderEvent(e)) << std::flush;
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return RpcError(g, "watch", s);
    return 0;
  }
  if (command == "top") {
    // On a terminal: redraw in place. Otherwise (logs, CI): print each table with a timestamp.
    const bool tty = isatty(STDOUT_FILENO);
    for (int64_t n = 0; count == 0 || n < count; ++n) {
      if (n > 0) absl::SleepFor(interval);
      plimsoll::v1::ListGuestsResponse view;
      grpc::Status s = stub->ListGuests(Context(g).get(), {}, &view);
      const std::string stamp = absl::FormatTime("%H:%M:%S", absl::Now(), absl::LocalTimeZone());
      std::string body = s.ok() ? plimsoll::ctl::RenderGuestTable(view, TableWidth(g.wide))
                                : "plimsolld unreachable at " + g.server + ": " + s.error_message() + "\n";
      if (tty) {
        std::cout << "\033[H\033[2J" << "plimsoll top  " << stamp << "  (Ctrl-C to quit)\n" << body << std::flush;
      } else if (g.json && s.ok()) {
        std::cout << ToJson(view, /*pretty=*/false) << "\n" << std::flush;
      } else {
        std::cout << "--- " << stamp << "\n" << body << std::flush;
      }
    }
    return 0;
  }
  return Usage("unknown command \"" + command + "\"");
}
