#include "server/agent/agent_sink_line.h"

#include <string>

#include "gtest/gtest.h"

namespace plimsoll::server::agent {
namespace {

TEST(AgentSinkLineTest, GuestWordTable) {
  const std::string long_reason(100, 'a');
  const struct {
    const char* what;
    std::string in;
    std::string want;
  } cases[] = {
      {"a documented name as it is", "below_keep", "below_keep"},
      {"empty", "", "-"},
      {"a newline cannot start a line of its own", "step\nuuid=spoofed connected=1",
       "step\\nuuid=spoofed\\x20connected=1"},
      {"a space cannot start another key", "step reclaim_state=X", "step\\x20reclaim_state=X"},
      {"terminal escapes", "\x1b[2Jstep", "\\x1b[2Jstep"},
      {"quotes and backslashes", "a\"b'c\\d", "a\\\"b\\'c\\\\d"},
      {"high bytes", "\xff\xfe", "\\xff\\xfe"},
      {"cut at 64 bytes", long_reason, std::string(64, 'a') + "..."},
      {"64 bytes: not cut", std::string(64, 'b'), std::string(64, 'b')},
  };
  for (const auto& c : cases) EXPECT_EQ(GuestWord(c.in), c.want) << c.what;
}

TEST(AgentSinkLineTest, TheGuestsReasonStaysOneWordOnOneLine) {
  AgentSignals s;
  s.uuid = "11111111-2222-3333-4444-555555555555";
  s.connected = true;
  s.sequence = 7;
  s.reclaim_state = v1::RECLAIM_STATE_IDLE;
  s.reclaim_reason = "below_keep\nuuid=other reclaim_requested_mib=99999";
  s.reclaim_requested_total_bytes = 3 << 20;
  const std::string line = SinkLine(s);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find(" reclaim_reason=below_keep\\nuuid=other\\x20reclaim_requested_mib=99999 "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" reclaim_requested_mib=3 "), std::string::npos) << line;
  EXPECT_EQ(line.rfind("uuid=", 0), 0u) << line;

  s.reclaim_reason = "step";
  EXPECT_NE(SinkLine(s).find(" reclaim_reason=step reclaim_requested_mib=3 "), std::string::npos) << SinkLine(s);
}

}  // namespace
}  // namespace plimsoll::server::agent
