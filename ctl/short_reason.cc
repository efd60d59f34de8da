#include "ctl/short_reason.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"

namespace plimsoll::ctl {
namespace {

// The numbers that decide a decision, most telling first. Others follow in the reason's order.
constexpr absl::string_view kDecidingKeys[] = {"taken", "granted", "wanted", "x",     "stall_pct", "refault",
                                               "ws",    "cache",   "free",   "floor", "hard"};
// Said by the table's own columns.
constexpr absl::string_view kDroppedKeys[] = {"src", "actual"};

bool Contains(absl::Span<const absl::string_view> keys, absl::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

}  // namespace

std::string ShortReason(absl::string_view reason, size_t width) {
  std::vector<absl::string_view> parts = absl::StrSplit(reason, " | ");
  absl::string_view head = absl::StripAsciiWhitespace(parts[0]);
  // "pagecache: ..." -> "...": the host line names the policy.
  if (size_t colon = head.find(": "); colon != absl::string_view::npos &&
                                      head.substr(0, colon).find_first_of(" =") == absl::string_view::npos) {
    head.remove_prefix(colon + 2);
  }
  std::string target;      // "->1022MiB"
  std::vector<std::pair<std::string, std::string>> numbers;  // key, "key=value"
  std::vector<std::string> words;  // words before the first key=value (a hold's cause)
  bool seen_kv = false;
  std::vector<absl::string_view> tokens = absl::StrSplit(head, ' ', absl::SkipEmpty());
  // A policy may write its numbers after its decision, past a " | " ("take x=0.00 taken=80MiB
  // -> 620MiB | src=agent actual=1024MiB ..."): a part right after the head that starts with a
  // key=value is the policy's; the loop's notes start with words.
  size_t first_note = 1;
  if (parts.size() > 1) {
    const absl::string_view next = absl::StripAsciiWhitespace(parts[1]);
    const size_t eq = next.find('=');
    if (eq != absl::string_view::npos && eq > 0 && eq < next.find(' ')) {
      std::vector<absl::string_view> more = absl::StrSplit(next, ' ', absl::SkipEmpty());
      tokens.insert(tokens.end(), more.begin(), more.end());
      first_note = 2;
    }
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    absl::string_view t = tokens[i];
    if (t == "->" && i + 1 < tokens.size()) {
      target = absl::StrCat("->", tokens[++i]);
      continue;
    }
    const size_t eq = t.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      if (!seen_kv) words.emplace_back(t);
      continue;
    }
    seen_kv = true;
    const absl::string_view key = t.substr(0, eq);
    // The first of a key wins: a policy may say a number in its decision and again in its numbers.
    if (!Contains(kDroppedKeys, key) &&
        std::none_of(numbers.begin(), numbers.end(), [&](const auto& n) { return n.first == key; })) {
      numbers.emplace_back(std::string(key), std::string(t));
    }
  }
  // What was done, and a hold's cause, in words ("retry churning", "hold").
  const std::string lead = absl::StrJoin(words, " ");

  std::vector<std::string> pieces;
  if (!lead.empty()) pieces.push_back(lead);
  for (size_t i = first_note; i < parts.size(); ++i) {
    absl::string_view note = absl::StripAsciiWhitespace(parts[i]);
    if (!note.empty()) pieces.push_back(absl::StrCat("| ", note));
  }
  for (absl::string_view key : kDecidingKeys) {
    for (const auto& [k, text] : numbers) {
      if (k == key) pieces.push_back(text);
    }
  }
  for (const auto& [k, text] : numbers) {
    if (!Contains(kDecidingKeys, k)) pieces.push_back(text);
  }
  // Last: a table shows the target in its own column.
  if (!target.empty()) pieces.push_back(target);

  std::string out;
  for (const std::string& piece : pieces) {
    const size_t need = out.empty() ? piece.size() : out.size() + 1 + piece.size();
    if (width == 0 || need <= width) {
      if (!out.empty()) out += ' ';
      out += piece;
      continue;
    }
    // Does not fit: cut it (the first piece) or mark that more was left out.
    if (out.empty()) {
      out = width > 3 ? piece.substr(0, width - 3) + "..." : piece.substr(0, width);
    } else if (out.size() + 4 <= width) {
      out += " ...";
    }
    break;
  }
  return out;
}

}  // namespace plimsoll::ctl
