#include "server/loop/view_arena.h"

#include <algorithm>

#include "google/protobuf/arena.h"

namespace plimsoll::server {
namespace {

// The arena and the view allocated on it, freed together.
struct ArenaView {
  explicit ArenaView(const google::protobuf::ArenaOptions& options)
      : arena(options),
        view(google::protobuf::Arena::CreateMessage<plimsoll::v1::ListGuestsResponse>(&arena)) {}
  google::protobuf::Arena arena;
  plimsoll::v1::ListGuestsResponse* view;  // on `arena`: freed with it, never deleted
};

}  // namespace

std::shared_ptr<plimsoll::v1::ListGuestsResponse> NewViewOnArena(size_t expected_bytes) {
  google::protobuf::ArenaOptions options;
  options.start_block_size = std::clamp<size_t>(expected_bytes, 1024, kViewArenaMaxBlockBytes);
  options.max_block_size = kViewArenaMaxBlockBytes;
  auto holder = std::make_shared<ArenaView>(options);
  // Aliasing: the pointer is the view, the ownership the holder's.
  return std::shared_ptr<plimsoll::v1::ListGuestsResponse>(holder, holder->view);
}

}  // namespace plimsoll::server
