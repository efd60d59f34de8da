// The published view's storage: each view lives on a protobuf arena of its own.
//
// A view of 10,000 guests is some 200,000 messages and strings. On the heap each was a malloc
// when the view was built and a free when the last reader let it go, a tick later: about a
// quarter of the loop's own CPU at that scale was malloc and free. On an arena they are carved
// from a few dozen blocks and freed with them, without running a destructor each.
//
// Thread-safety: the view is built by one thread before it is shared; afterwards it is read
// only (the loop publishes it as const), and the arena goes with the last shared_ptr, on
// whichever thread drops it.
#ifndef PLIMSOLL_SERVER_LOOP_VIEW_ARENA_H_
#define PLIMSOLL_SERVER_LOOP_VIEW_ARENA_H_

#include <cstddef>
#include <memory>

#include "plimsoll/v1/control.pb.h"

namespace plimsoll::server {

// The arena's blocks grow to this size and stay there: under glibc's mmap threshold in
// plimsolld (server/main.cc, 128 KiB), so a block is recycled by malloc instead of being mapped
// and faulted in anew every tick.
inline constexpr size_t kViewArenaMaxBlockBytes = size_t{64} << 10;

// An empty view on a new arena, which it and every copy of the pointer own: the arena is freed
// with the last of them. `expected_bytes` (e.g. the previous view's SpaceUsedLong) sizes the
// first block, so a view like the last one takes few blocks; 0 starts small.
std::shared_ptr<plimsoll::v1::ListGuestsResponse> NewViewOnArena(size_t expected_bytes);

}  // namespace plimsoll::server

#endif  // PLIMSOLL_SERVER_LOOP_VIEW_ARENA_H_
