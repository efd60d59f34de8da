#include "server/api/control_service.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/api/control_validation.h"
#include "server/api/guest_lookup.h"
#include "server/events/view_events.h"
#include "server/events/watch_hub.h"

namespace plimsoll::server {
namespace {

WatchFilter FilterOf(const plimsoll::v1::WatchRequest& r) {
  WatchFilter f;
  f.guests.assign(r.guests().begin(), r.guests().end());
  for (int k : r.kinds()) f.kinds.push_back(static_cast<plimsoll::v1::WatchEventKind>(k));
  f.include_holds = r.include_holds();
  return f;
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

ControlService::ControlService(ViewSource view, ControlCore* core, ControlServiceOptions options)
    : view_(std::move(view)), core_(core), options_(std::move(options)) {}

grpc::Status ControlService::Authorize(grpc::ServerContext* context, const char* method, Caller* caller) const {
  if (options_.authz == nullptr) {
    caller->role = Role::kAdmin;
    const std::string peer = context->peer();
    caller->identity = absl::StartsWith(peer, "unix:") ? "unix" : peer;
    caller->authenticated = true;
    return grpc::Status::OK;
  }
  return options_.authz->Check(*context, method, caller);
}

grpc::Status ControlService::NeedCore(const char* method) const {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      absl::StrCat(method, " is not available in this plimsolld yet (no control core wired)"));
}

grpc::Status ControlService::ListGuests(grpc::ServerContext* context, const plimsoll::v1::ListGuestsRequest*,
                                        plimsoll::v1::ListGuestsResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "ListGuests", &caller); !s.ok()) return s;
  *response = *view_();
  return grpc::Status::OK;
}

grpc::Status ControlService::GetGuest(grpc::ServerContext* context, const plimsoll::v1::GetGuestRequest* request,
                                      plimsoll::v1::Guest* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "GetGuest", &caller); !s.ok()) return s;
  if (request->guest().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "guest: give a domain name or UUID");
  }
  auto view = view_();
  if (const plimsoll::v1::Guest* g = FindGuest(*view, request->guest())) {
    *response = *g;
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("no running guest named or with UUID \"", request->guest(), "\""));
}

grpc::Status ControlService::GetHostStatus(grpc::ServerContext* context, const plimsoll::v1::GetHostStatusRequest*,
                                           plimsoll::v1::HostStatus* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "GetHostStatus", &caller); !s.ok()) return s;
  *response = view_()->host();
  return grpc::Status::OK;
}

grpc::Status ControlService::GetHostLine(grpc::ServerContext* context, const plimsoll::v1::GetHostLineRequest*,
                                         plimsoll::v1::HostLine* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "GetHostLine", &caller); !s.ok()) return s;
  if (core_ == nullptr) {
    *response = view_()->host_line();
    return grpc::Status::OK;
  }
  auto r = core_->GetHostLine();
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControlService::SetGuestPolicy(grpc::ServerContext* context,
                                            const plimsoll::v1::SetGuestPolicyRequest* request,
                                            plimsoll::v1::SetGuestPolicyResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "SetGuestPolicy", &caller); !s.ok()) return s;
  if (absl::Status s = ValidateSetGuestPolicy(*request); !s.ok()) return ToGrpcStatus(s);
  if (core_ == nullptr) return NeedCore("SetGuestPolicy");
  auto r = core_->SetGuestPolicy(*request, caller);
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControlService::ClearGuestPolicy(grpc::ServerContext* context,
                                              const plimsoll::v1::ClearGuestPolicyRequest* request,
                                              plimsoll::v1::ClearGuestPolicyResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "ClearGuestPolicy", &caller); !s.ok()) return s;
  if (absl::Status s = ValidateClearGuestPolicy(*request); !s.ok()) return ToGrpcStatus(s);
  if (core_ == nullptr) return NeedCore("ClearGuestPolicy");
  auto r = core_->ClearGuestPolicy(*request, caller);
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControlService::ListGuestPolicies(grpc::ServerContext* context,
                                               const plimsoll::v1::ListGuestPoliciesRequest*,
                                               plimsoll::v1::ListGuestPoliciesResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "ListGuestPolicies", &caller); !s.ok()) return s;
  if (core_ == nullptr) return NeedCore("ListGuestPolicies");
  auto r = core_->ListGuestPolicies();
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControlService::SetHostPolicy(grpc::ServerContext* context,
                                           const plimsoll::v1::SetHostPolicyRequest* request,
                                           plimsoll::v1::SetHostPolicyResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "SetHostPolicy", &caller); !s.ok()) return s;
  if (absl::Status s = ValidateSetHostPolicy(*request, options_.policy_names); !s.ok()) return ToGrpcStatus(s);
  if (core_ == nullptr) return NeedCore("SetHostPolicy");
  auto r = core_->SetHostPolicy(*request, caller);
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControlService::Reclaim(grpc::ServerContext* context, const plimsoll::v1::ReclaimRequest* request,
                                     plimsoll::v1::ReclaimResponse* response) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "Reclaim", &caller); !s.ok()) return s;
  if (absl::Status s = ValidateReclaim(*request); !s.ok()) return ToGrpcStatus(s);
  if (core_ == nullptr) return NeedCore("Reclaim");
  auto r = core_->Reclaim(*request, caller);
  if (!r.ok()) return ToGrpcStatus(r.status());
  *response->mutable_plan() = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControlService::Watch(grpc::ServerContext* context, const plimsoll::v1::WatchRequest* request,
                                   grpc::ServerWriter<plimsoll::v1::WatchEvent>* writer) {
  Caller caller;
  if (grpc::Status s = Authorize(context, "Watch", &caller); !s.ok()) return s;
  if (absl::Status s = ValidateWatch(*request); !s.ok()) return ToGrpcStatus(s);
  if (core_ == nullptr) return WatchView(context, *request, writer);
  const WatchFilter filter = FilterOf(*request);
  // Subscribe before the snapshot so nothing falls between the two.
  std::unique_ptr<WatchSubscription> sub = core_->Watch(filter);
  if (request->initial_snapshot()) {
    for (const auto& e : SnapshotEvents(*view_())) {
      if (WatchFilterMatches(filter, e) && !writer->Write(e)) return grpc::Status::OK;
    }
  }
  plimsoll::v1::WatchEvent event;
  while (!context->IsCancelled()) {
    switch (sub->Next(&event, options_.watch_poll)) {
      case WatchSubscription::Result::kEvent:
        if (!writer->Write(event)) return grpc::Status::OK;  // the client went away
        break;
      case WatchSubscription::Result::kTimeout:
        break;
      case WatchSubscription::Result::kClosed:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "plimsolld is shutting down; watch again later");
    }
  }
  return grpc::Status::CANCELLED;
}

grpc::Status ControlService::WatchView(grpc::ServerContext* context, const plimsoll::v1::WatchRequest& request,
                                       grpc::ServerWriter<plimsoll::v1::WatchEvent>* writer) {
  const WatchFilter filter = FilterOf(request);
  auto previous = view_();
  uint64_t sequence = 0;
  auto send = [&](plimsoll::v1::WatchEvent e) {
    if (!WatchFilterMatches(filter, e)) return true;
    e.set_sequence(++sequence);
    if (e.unix_micros() == 0) e.set_unix_micros(absl::ToUnixMicros(absl::Now()));
    return writer->Write(e);
  };
  if (request.initial_snapshot()) {
    for (auto& e : SnapshotEvents(*previous)) {
      if (!send(std::move(e))) return grpc::Status::OK;
    }
  }
  while (!context->IsCancelled()) {
    absl::SleepFor(options_.watch_poll);
    auto next = view_();
    if (next == previous) continue;
    for (auto& e : EventsBetween(previous.get(), *next)) {
      if (!send(std::move(e))) return grpc::Status::OK;
    }
    previous = std::move(next);
  }
  return grpc::Status::CANCELLED;
}

}  // namespace plimsoll::server
