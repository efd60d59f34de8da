// gRPC adapter for plimsoll.v1.Control: unpacks requests, reads the control
// loop's published view, converts errors once. Holds no state of its own.
#ifndef PLIMSOLL_SERVER_CONTROL_SERVICE_H_
#define PLIMSOLL_SERVER_CONTROL_SERVICE_H_

#include <functional>
#include <memory>

#include "plimsoll/v1/control.grpc.pb.h"

namespace plimsoll::server {

using ViewSource = std::function<std::shared_ptr<const plimsoll::v1::ListGuestsResponse>()>;

class ControlService final : public plimsoll::v1::Control::Service {
 public:
  explicit ControlService(ViewSource view) : view_(std::move(view)) {}

  grpc::Status ListGuests(grpc::ServerContext* context, const plimsoll::v1::ListGuestsRequest* request,
                          plimsoll::v1::ListGuestsResponse* response) override;
  grpc::Status GetGuest(grpc::ServerContext* context, const plimsoll::v1::GetGuestRequest* request,
                        plimsoll::v1::Guest* response) override;
  grpc::Status GetHostStatus(grpc::ServerContext* context,
                             const plimsoll::v1::GetHostStatusRequest* request,
                             plimsoll::v1::HostStatus* response) override;

 private:
  ViewSource view_;
};

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_CONTROL_SERVICE_H_
