#include "server/control_service.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace plimsoll::server {

grpc::Status ControlService::ListGuests(grpc::ServerContext*, const plimsoll::v1::ListGuestsRequest*,
                                        plimsoll::v1::ListGuestsResponse* response) {
  *response = *view_();
  return grpc::Status::OK;
}

grpc::Status ControlService::GetGuest(grpc::ServerContext*, const plimsoll::v1::GetGuestRequest* request,
                                      plimsoll::v1::Guest* response) {
  if (request->guest().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "field \"guest\": give a domain name or UUID");
  }
  const std::string wanted_uuid = absl::AsciiStrToLower(request->guest());
  auto view = view_();
  for (const auto& g : view->guests()) {
    if (g.name() == request->guest() || g.uuid() == wanted_uuid) {
      *response = g;
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("no running guest named or with UUID \"", request->guest(), "\""));
}

grpc::Status ControlService::GetHostStatus(grpc::ServerContext*, const plimsoll::v1::GetHostStatusRequest*,
                                           plimsoll::v1::HostStatus* response) {
  *response = view_()->host();
  return grpc::Status::OK;
}

}  // namespace plimsoll::server
