// gRPC adapter for plimsoll.v1.Control. Per RPC: authorize the caller
// (authz.h), validate the request (control_validation.h), read the control
// loop's published view or call the ControlCore, convert the status once.
// Holds no state of its own.
//
// Until a ControlCore is wired (core == nullptr), the mutating RPCs and
// ListGuestPolicies answer UNIMPLEMENTED, and Watch is served from the
// published view alone (guest changes and decisions, polled).
#ifndef PLIMSOLL_SERVER_API_CONTROL_SERVICE_H_
#define PLIMSOLL_SERVER_API_CONTROL_SERVICE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "plimsoll/v1/control.grpc.pb.h"
#include "server/api/control_core.h"
#include "server/api/security/authz.h"

namespace plimsoll::server {

using ViewSource = std::function<std::shared_ptr<const plimsoll::v1::ListGuestsResponse>()>;

struct ControlServiceOptions {
  // Null: every caller is admin (the daemon's historic local-socket-only
  // behaviour). The daemon passes its Authorizer.
  const Authorizer* authz = nullptr;
  // Names SetHostPolicy accepts for policy.policy; empty: left to the core.
  std::vector<std::string> policy_names;
  // How often a Watch handler wakes to notice a cancelled client or, without
  // a core, to poll the view.
  absl::Duration watch_poll = absl::Milliseconds(250);
};

// absl::Status -> grpc::Status (same codes, same message).
grpc::Status ToGrpcStatus(const absl::Status& status);

class ControlService final : public plimsoll::v1::Control::Service {
 public:
  // `core` (may be null, see above) and options.authz are borrowed.
  explicit ControlService(ViewSource view, ControlCore* core = nullptr, ControlServiceOptions options = {});

  grpc::Status ListGuests(grpc::ServerContext* context, const plimsoll::v1::ListGuestsRequest* request,
                          plimsoll::v1::ListGuestsResponse* response) override;
  grpc::Status GetGuest(grpc::ServerContext* context, const plimsoll::v1::GetGuestRequest* request,
                        plimsoll::v1::Guest* response) override;
  grpc::Status GetHostStatus(grpc::ServerContext* context, const plimsoll::v1::GetHostStatusRequest* request,
                             plimsoll::v1::HostStatus* response) override;
  // From the core (which withdraws a line too old to trust), or from the view without one.
  grpc::Status GetHostLine(grpc::ServerContext* context, const plimsoll::v1::GetHostLineRequest* request,
                           plimsoll::v1::HostLine* response) override;
  grpc::Status SetGuestPolicy(grpc::ServerContext* context, const plimsoll::v1::SetGuestPolicyRequest* request,
                              plimsoll::v1::SetGuestPolicyResponse* response) override;
  grpc::Status ClearGuestPolicy(grpc::ServerContext* context, const plimsoll::v1::ClearGuestPolicyRequest* request,
                                plimsoll::v1::ClearGuestPolicyResponse* response) override;
  grpc::Status ListGuestPolicies(grpc::ServerContext* context,
                                 const plimsoll::v1::ListGuestPoliciesRequest* request,
                                 plimsoll::v1::ListGuestPoliciesResponse* response) override;
  grpc::Status SetHostPolicy(grpc::ServerContext* context, const plimsoll::v1::SetHostPolicyRequest* request,
                             plimsoll::v1::SetHostPolicyResponse* response) override;
  grpc::Status Reclaim(grpc::ServerContext* context, const plimsoll::v1::ReclaimRequest* request,
                       plimsoll::v1::ReclaimResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const plimsoll::v1::WatchRequest* request,
                     grpc::ServerWriter<plimsoll::v1::WatchEvent>* writer) override;

 private:
  // Authorizes `method` for the peer of `context`.
  grpc::Status Authorize(grpc::ServerContext* context, const char* method, Caller* caller) const;
  grpc::Status NeedCore(const char* method) const;
  // Watch without a core: diffs of the published view.
  grpc::Status WatchView(grpc::ServerContext* context, const plimsoll::v1::WatchRequest& request,
                         grpc::ServerWriter<plimsoll::v1::WatchEvent>* writer);

  ViewSource view_;
  ControlCore* core_;
  ControlServiceOptions options_;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_API_CONTROL_SERVICE_H_
