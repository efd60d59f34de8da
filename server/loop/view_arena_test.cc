#include "server/loop/view_arena.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

TEST(ViewArenaTest, TheViewIsOnAnArenaAndLivesAsLongAsAnyPointer) {
  std::shared_ptr<plimsoll::v1::ListGuestsResponse> view = NewViewOnArena(0);
  ASSERT_NE(view, nullptr);
  EXPECT_NE(view->GetArena(), nullptr);
  for (int i = 0; i < 1000; ++i) {
    plimsoll::v1::Guest* g = view->add_guests();
    g->set_uuid("uuid-" + std::to_string(i));
    g->mutable_last_decision()->set_reason(std::string(200, 'r'));
    EXPECT_EQ(g->GetArena(), view->GetArena());
  }
  std::shared_ptr<const plimsoll::v1::ListGuestsResponse> reader = view;
  view.reset();  // the reader's pointer keeps the arena
  ASSERT_EQ(reader->guests_size(), 1000);
  EXPECT_EQ(reader->guests(999).uuid(), "uuid-999");
  EXPECT_EQ(reader->guests(999).last_decision().reason(), std::string(200, 'r'));
}

TEST(ViewArenaTest, CopiesLeaveTheArena) {
  std::shared_ptr<plimsoll::v1::ListGuestsResponse> view = NewViewOnArena(size_t{1} << 20);
  view->add_guests()->set_name("web");
  plimsoll::v1::ListGuestsResponse copy = *view;  // as the API and a balloon-change fold copy it
  view.reset();
  EXPECT_EQ(copy.GetArena(), nullptr);
  ASSERT_EQ(copy.guests_size(), 1);
  EXPECT_EQ(copy.guests(0).name(), "web");
}

}  // namespace
}  // namespace plimsoll::server
