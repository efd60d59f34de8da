#include "sim/scenario.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/units.h"

namespace plimsoll::sim {
namespace {

// key=value pairs of one line, in order, with the keys a line may use.
class Pairs {
 public:
  static absl::StatusOr<Pairs> Parse(const std::vector<absl::string_view>& words) {
    Pairs p;
    for (absl::string_view word : words) {
      const size_t eq = word.find('=');
      if (eq == absl::string_view::npos || eq == 0) {
        return absl::InvalidArgumentError(absl::StrCat("expected key=value, got \"", word, "\""));
      }
      std::string key(word.substr(0, eq));
      if (p.values_.contains(key)) {
        return absl::InvalidArgumentError(absl::StrCat("key \"", key, "\" given twice"));
      }
      p.order_.push_back(key);
      p.values_[key] = std::string(word.substr(eq + 1));
    }
    return p;
  }

  // INVALID_ARGUMENT naming the first key not in `allowed`.
  absl::Status OnlyKeys(const std::vector<std::string>& allowed) const {
    for (const std::string& key : order_) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown key \"", key, "\" (known: ",
                                                       absl::StrJoin(allowed, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  const std::string* Find(const std::string& key) const {
    auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second;
  }

  absl::Status Require(const std::string& key) const {
    if (Find(key) == nullptr) return absl::InvalidArgumentError(absl::StrCat("missing ", key, "="));
    return absl::OkStatus();
  }

  // Each Get leaves *out untouched when the key is absent.
  absl::Status GetBytes(const std::string& key, double* out) const {
    return Get(key, out, ParseBytes);
  }
  // An optional size: set only when the key is there.
  absl::Status GetOptionalBytes(const std::string& key, std::optional<double>* out) const {
    if (Find(key) == nullptr) return absl::OkStatus();
    double v = 0;
    if (absl::Status st = GetBytes(key, &v); !st.ok()) return st;
    *out = v;
    return absl::OkStatus();
  }
  absl::Status GetRate(const std::string& key, double* out) const {
    return Get(key, out, ParseRate);
  }
  absl::Status GetSeconds(const std::string& key, double* out) const {
    return Get(key, out, ParseSeconds);
  }
  absl::Status GetNumber(const std::string& key, double* out) const {
    const std::string* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (!absl::SimpleAtod(*v, out)) {
      return absl::InvalidArgumentError(absl::StrCat(key, ": bad number \"", *v, "\""));
    }
    return absl::OkStatus();
  }
  absl::Status GetBool(const std::string& key, bool* out) const {
    const std::string* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    if (*v == "true") {
      *out = true;
    } else if (*v == "false") {
      *out = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(key, ": expected true or false, got \"", *v,
                                                     "\""));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Get(const std::string& key, double* out,
                   const std::function<absl::StatusOr<double>(absl::string_view)>& parse) const {
    const std::string* v = Find(key);
    if (v == nullptr) return absl::OkStatus();
    absl::StatusOr<double> parsed = parse(*v);
    if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(key, ": ", parsed.status().message()));
    *out = *parsed;
    return absl::OkStatus();
  }

  std::vector<std::string> order_;
  absl::flat_hash_map<std::string, std::string> values_;
};

absl::StatusOr<FileAccess> ParseFileAccess(absl::string_view text) {
  for (FileAccess a : {FileAccess::kRead, FileAccess::kMmap}) {
    if (text == FileAccessName(a)) return a;
  }
  return absl::InvalidArgumentError(absl::StrCat("access: unknown \"", text, "\" (known: read, mmap)"));
}

absl::StatusOr<Behaviour> ParseBehaviour(absl::string_view text) {
  for (Behaviour b : {Behaviour::kNormal, Behaviour::kStuck, Behaviour::kTrickle, Behaviour::kChurn,
                      Behaviour::kNoStats, Behaviour::kNonsense, Behaviour::kStale}) {
    if (text == BehaviourName(b)) return b;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "behaviour: unknown \"", text,
      "\" (known: normal, stuck, trickle, churn, no_stats, nonsense, stale)"));
}

absl::StatusOr<CompareOp> ParseOp(absl::string_view text) {
  if (text == "<") return CompareOp::kLess;
  if (text == "<=") return CompareOp::kLessEqual;
  if (text == ">") return CompareOp::kGreater;
  if (text == ">=") return CompareOp::kGreaterEqual;
  if (text == "==") return CompareOp::kEqual;
  return absl::InvalidArgumentError(absl::StrCat("unknown operator \"", text,
                                                 "\" (use <, <=, >, >=, ==)"));
}

// "mom" or "mom:guest.a.stall_s" on the right-hand side of an expectation.
void SetOther(absl::string_view word, Expectation* e) {
  const size_t colon = word.find(':');
  e->other_policy = std::string(word.substr(0, colon));
  if (colon != absl::string_view::npos) e->other_metric = std::string(word.substr(colon + 1));
}

// `expect <policy> <metric> <op> <number>` or `... <op> [<factor> *] <policy>[:<metric>]`.
absl::StatusOr<Expectation> ParseExpectation(const std::vector<absl::string_view>& words) {
  if (words.size() != 4 && words.size() != 6) {
    return absl::InvalidArgumentError(
        "expect needs: <policy> <metric> <op> <number | [factor *] policy[:metric]>");
  }
  Expectation e;
  e.policy = std::string(words[0]);
  e.metric = std::string(words[1]);
  auto op = ParseOp(words[2]);
  if (!op.ok()) return op.status();
  e.op = *op;
  if (words.size() == 6) {
    if (words[4] != "*" || !absl::SimpleAtod(words[3], &e.factor)) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected \"<factor> * <policy>\", got \"", words[3], " ", words[4], " ",
                       words[5], "\""));
    }
    SetOther(words[5], &e);
    return e;
  }
  if (!absl::SimpleAtod(words[3], &e.value)) SetOther(words[3], &e);
  return e;
}

absl::Status ParseLine(absl::string_view keyword, const std::vector<absl::string_view>& rest,
                       absl::string_view raw_rest, int line, Scenario* s,
                       absl::flat_hash_map<std::string, size_t>* guest_index, bool* seen_header) {
  if (keyword == "description") {
    if (!s->description.empty()) absl::StrAppend(&s->description, " ");
    absl::StrAppend(&s->description, absl::StripAsciiWhitespace(raw_rest));
    return absl::OkStatus();
  }
  if (keyword == "tags") {
    for (absl::string_view t : rest) s->tags.emplace_back(t);
    return absl::OkStatus();
  }
  if (keyword == "expect") {
    auto e = ParseExpectation(rest);
    if (!e.ok()) return e.status();
    e->line = line;
    e->text = std::string(absl::StripAsciiWhitespace(raw_rest));
    s->expectations.push_back(*std::move(e));
    return absl::OkStatus();
  }
  auto pairs = Pairs::Parse(rest);
  if (!pairs.ok()) return pairs.status();
  const Pairs& p = *pairs;
  if (keyword == "scenario") {
    if (*seen_header) return absl::InvalidArgumentError("second scenario line");
    *seen_header = true;
    if (absl::Status st = p.OnlyKeys({"name", "duration", "tick", "stale_after"}); !st.ok()) return st;
    if (absl::Status st = p.Require("name"); !st.ok()) return st;
    s->name = *p.Find("name");
    if (absl::Status st = p.GetSeconds("duration", &s->duration); !st.ok()) return st;
    if (absl::Status st = p.GetSeconds("tick", &s->tick); !st.ok()) return st;
    if (absl::Status st = p.GetSeconds("stale_after", &s->stale_after); !st.ok()) return st;
    if (s->duration < 1 || s->tick < 1) {
      return absl::InvalidArgumentError("duration and tick must be at least 1s");
    }
    return absl::OkStatus();
  }
  if (keyword == "host") {
    if (absl::Status st = p.OnlyKeys({"total", "reserve", "budget"}); !st.ok()) return st;
    if (absl::Status st = p.Require("total"); !st.ok()) return st;
    if (absl::Status st = p.GetBytes("total", &s->host.total); !st.ok()) return st;
    if (absl::Status st = p.GetBytes("reserve", &s->host.reserve); !st.ok()) return st;
    if (p.Find("budget") != nullptr) {
      double budget = 0;
      if (absl::Status st = p.GetBytes("budget", &budget); !st.ok()) return st;
      s->host.budget = budget;
    }
    return absl::OkStatus();
  }
  if (keyword == "host_event") {
    if (absl::Status st = p.OnlyKeys({"at", "other"}); !st.ok()) return st;
    HostEvent e;
    if (absl::Status st = p.GetSeconds("at", &e.at); !st.ok()) return st;
    if (absl::Status st = p.GetBytes("other", &e.other); !st.ok()) return st;
    s->host.events.push_back(e);
    return absl::OkStatus();
  }
  if (keyword == "guest") {
    if (absl::Status st = p.OnlyKeys({"name", "max", "min", "start", "cache", "agent", "autodeflate", "speed",
                                      "shares", "kernel", "unreclaimable", "alloc_rate",
                                      "disk_rate", "refault_stall", "pace_noise", "read_drift", "min_free", "access",
                                      "balloon_pressure", "stats_period", "behaviour", "behaviour_at"});
        !st.ok()) {
      return st;
    }
    if (absl::Status st = p.Require("name"); !st.ok()) return st;
    if (absl::Status st = p.Require("max"); !st.ok()) return st;
    GuestSpec g;
    g.name = *p.Find("name");
    if (guest_index->contains(g.name)) {
      return absl::InvalidArgumentError(absl::StrCat("guest \"", g.name, "\" defined twice"));
    }
    absl::Status st;
    if (st = p.GetBytes("max", &g.max); !st.ok()) return st;
    if (st = p.GetBytes("min", &g.min); !st.ok()) return st;
    if (st = p.GetOptionalBytes("start", &g.start); !st.ok()) return st;
    if (st = p.GetOptionalBytes("cache", &g.cache); !st.ok()) return st;
    if (st = p.GetOptionalBytes("kernel", &g.kernel); !st.ok()) return st;
    if (st = p.GetBool("agent", &g.agent); !st.ok()) return st;
    if (st = p.GetBool("autodeflate", &g.autodeflate); !st.ok()) return st;
    if (st = p.GetBool("balloon_pressure", &g.balloon_pressure); !st.ok()) return st;
    if (st = p.GetRate("speed", &g.speed); !st.ok()) return st;
    if (st = p.GetNumber("shares", &g.shares); !st.ok()) return st;
    if (st = p.GetBytes("unreclaimable", &g.unreclaimable); !st.ok()) return st;
    if (st = p.GetRate("alloc_rate", &g.alloc_rate); !st.ok()) return st;
    if (st = p.GetRate("disk_rate", &g.disk_rate); !st.ok()) return st;
    if (st = p.GetNumber("refault_stall", &g.refault_stall); !st.ok()) return st;
    if (st = p.GetNumber("pace_noise", &g.pace_noise); !st.ok()) return st;
    if (st = p.GetNumber("read_drift", &g.read_drift); !st.ok()) return st;
    if (st = p.GetOptionalBytes("min_free", &g.min_free); !st.ok()) return st;
    if (st = p.GetSeconds("stats_period", &g.stats_period); !st.ok()) return st;
    if (st = p.GetSeconds("behaviour_at", &g.behaviour_at); !st.ok()) return st;
    if (const std::string* a = p.Find("access"); a != nullptr) {
      auto access = ParseFileAccess(*a);
      if (!access.ok()) return access.status();
      g.access = *access;
    }
    if (const std::string* b = p.Find("behaviour"); b != nullptr) {
      auto behaviour = ParseBehaviour(*b);
      if (!behaviour.ok()) return behaviour.status();
      g.behaviour = *behaviour;
    }
    if (g.max <= 0) return absl::InvalidArgumentError("max must be positive");
    if (g.min > g.max) return absl::InvalidArgumentError("min above max");
    if (g.start.has_value() && (*g.start > g.max || *g.start <= 0)) {
      return absl::InvalidArgumentError("start must be in (0, max]");
    }
    if (g.stats_period < 1) return absl::InvalidArgumentError("stats_period must be at least 1s");
    if (g.disk_rate <= 0) return absl::InvalidArgumentError("disk_rate must be positive");
    if (g.pace_noise < 0 || g.pace_noise > 0.5) {
      return absl::InvalidArgumentError("pace_noise must be in [0, 0.5]");
    }
    if (g.read_drift < 0 || g.read_drift > 0.5) {
      return absl::InvalidArgumentError("read_drift must be in [0, 0.5]");
    }
    if (g.refault_stall < 0 || g.refault_stall > 1) {
      return absl::InvalidArgumentError("refault_stall must be in [0, 1]");
    }
    (*guest_index)[g.name] = s->guests.size();
    s->guests.push_back(std::move(g));
    return absl::OkStatus();
  }
  if (keyword == "phase") {
    if (absl::Status st = p.OnlyKeys({"guest", "at", "anon", "hot", "hot_rate", "stream_rate", "loop"});
        !st.ok()) {
      return st;
    }
    if (absl::Status st = p.Require("guest"); !st.ok()) return st;
    auto it = guest_index->find(*p.Find("guest"));
    if (it == guest_index->end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("phase for unknown guest \"", *p.Find("guest"), "\" (define it first)"));
    }
    GuestSpec& g = s->guests[it->second];
    Phase ph;
    // A phase starts from the previous one: only what changes needs writing.
    if (!g.phases.empty()) ph = g.phases.back();
    absl::Status st;
    if (st = p.GetSeconds("at", &ph.at); !st.ok()) return st;
    if (st = p.GetBytes("anon", &ph.anon); !st.ok()) return st;
    if (st = p.GetBytes("hot", &ph.hot); !st.ok()) return st;
    if (st = p.GetRate("hot_rate", &ph.hot_rate); !st.ok()) return st;
    if (st = p.GetRate("stream_rate", &ph.stream_rate); !st.ok()) return st;
    if (st = p.GetBytes("loop", &ph.loop); !st.ok()) return st;
    if (!g.phases.empty() && ph.at <= g.phases.back().at) {
      return absl::InvalidArgumentError("phases of a guest must be in time order");
    }
    g.phases.push_back(ph);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown keyword \"", keyword,
      "\" (known: scenario, description, tags, host, host_event, guest, phase, expect)"));
}


// A plain number (shares=, an expectation's value) that SimpleAtod reads back exactly.
std::string Number(double v) {
  std::string text = absl::StrCat(v);
  double back = 0;
  if (!absl::SimpleAtod(text, &back) || back != v) text = absl::StrFormat("%.17g", v);
  return text;
}

// The words after `expect`: the line as written when it was parsed, else built from the fields.
std::string ExpectationText(const Expectation& e) {
  if (!e.text.empty()) return e.text;
  std::string rhs;
  if (e.other_policy.has_value()) {
    if (e.factor != 1) absl::StrAppend(&rhs, Number(e.factor), " * ");
    absl::StrAppend(&rhs, *e.other_policy);
    if (e.other_metric.has_value()) absl::StrAppend(&rhs, ":", *e.other_metric);
  } else {
    rhs = Number(e.value);
  }
  return absl::StrCat(e.policy, " ", e.metric, " ", CompareOpText(e.op), " ", rhs);
}

std::string Bytes(double v) { return FormatExactBytes(v); }
std::string Rate(double v) { return absl::StrCat(FormatExactBytes(v), "/s"); }
std::string Seconds(double v) { return FormatExactSeconds(v); }
const char* Bool(bool v) { return v ? "true" : "false"; }

}  // namespace

const char* FileAccessName(FileAccess a) { return a == FileAccess::kMmap ? "mmap" : "read"; }

const char* BehaviourName(Behaviour b) {
  switch (b) {
    case Behaviour::kNormal:
      return "normal";
    case Behaviour::kStuck:
      return "stuck";
    case Behaviour::kTrickle:
      return "trickle";
    case Behaviour::kChurn:
      return "churn";
    case Behaviour::kNoStats:
      return "no_stats";
    case Behaviour::kNonsense:
      return "nonsense";
    case Behaviour::kStale:
      return "stale";
  }
  return "normal";
}

bool Scenario::HasTag(absl::string_view tag) const {
  return std::find(tags.begin(), tags.end(), tag) != tags.end();
}

double Scenario::GuestBudget() const {
  double budget = std::max(0.0, host.total - host.reserve);
  if (host.budget.has_value()) budget = std::min(budget, *host.budget);
  return budget;
}

absl::StatusOr<Scenario> ParseScenario(absl::string_view text) {
  Scenario s;
  absl::flat_hash_map<std::string, size_t> guest_index;
  bool seen_header = false;
  bool seen_host = false;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    const absl::string_view keyword = words[0];
    const absl::string_view raw_rest = line.substr(keyword.size());
    words.erase(words.begin());
    if (keyword == "host") {
      if (seen_host) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": second host line"));
      }
      seen_host = true;
    }
    absl::Status st = ParseLine(keyword, words, raw_rest, line_number, &s, &guest_index, &seen_header);
    if (!st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": ", keyword, ": ",
                                                     st.message()));
    }
  }
  if (!seen_header) return absl::InvalidArgumentError("no scenario line");
  if (!seen_host) return absl::InvalidArgumentError("no host line");
  if (s.guests.empty()) return absl::InvalidArgumentError("no guest");
  for (const GuestSpec& g : s.guests) {
    if (g.phases.empty() || g.phases.front().at > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("guest \"", g.name, "\" needs a phase at=0"));
    }
  }
  std::stable_sort(s.host.events.begin(), s.host.events.end(),
                   [](const HostEvent& a, const HostEvent& b) { return a.at < b.at; });
  return s;
}

absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read scenario file ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto s = ParseScenario(buffer.str());
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.status().message()));
  return s;
}

std::string FormatScenario(const Scenario& s) {
  std::string out;
  absl::StrAppend(&out, "scenario name=", s.name, " duration=", Seconds(s.duration),
                  " tick=", Seconds(s.tick), " stale_after=", Seconds(s.stale_after), "\n");
  if (!s.description.empty()) absl::StrAppend(&out, "description ", s.description, "\n");
  if (!s.tags.empty()) absl::StrAppend(&out, "tags ", absl::StrJoin(s.tags, " "), "\n");
  absl::StrAppend(&out, "host total=", Bytes(s.host.total), " reserve=", Bytes(s.host.reserve));
  if (s.host.budget.has_value()) absl::StrAppend(&out, " budget=", Bytes(*s.host.budget));
  absl::StrAppend(&out, "\n");
  for (const HostEvent& e : s.host.events) {
    absl::StrAppend(&out, "host_event at=", Seconds(e.at), " other=", Bytes(e.other), "\n");
  }
  for (const GuestSpec& g : s.guests) {
    absl::StrAppend(&out, "guest name=", g.name, " max=", Bytes(g.max), " min=", Bytes(g.min));
    if (g.start.has_value()) absl::StrAppend(&out, " start=", Bytes(*g.start));
    if (g.cache.has_value()) absl::StrAppend(&out, " cache=", Bytes(*g.cache));
    absl::StrAppend(&out, " agent=", Bool(g.agent), " autodeflate=", Bool(g.autodeflate),
                    " speed=", Rate(g.speed), " shares=", Number(g.shares));
    if (g.kernel.has_value()) absl::StrAppend(&out, " kernel=", Bytes(*g.kernel));
    if (g.min_free.has_value()) absl::StrAppend(&out, " min_free=", Bytes(*g.min_free));
    absl::StrAppend(&out, " unreclaimable=", Bytes(g.unreclaimable),
                    " alloc_rate=", Rate(g.alloc_rate), " disk_rate=", Rate(g.disk_rate),
                    " refault_stall=", Number(g.refault_stall), " pace_noise=", Number(g.pace_noise),
                    " access=", FileAccessName(g.access));
    if (g.read_drift > 0) absl::StrAppend(&out, " read_drift=", Number(g.read_drift));
    if (g.balloon_pressure) absl::StrAppend(&out, " balloon_pressure=true");
    absl::StrAppend(&out, " stats_period=", Seconds(g.stats_period),
                    " behaviour=", BehaviourName(g.behaviour),
                    " behaviour_at=", Seconds(g.behaviour_at), "\n");
    for (const Phase& p : g.phases) {
      absl::StrAppend(&out, "phase guest=", g.name, " at=", Seconds(p.at), " anon=", Bytes(p.anon),
                      " hot=", Bytes(p.hot), " hot_rate=", Rate(p.hot_rate),
                      " stream_rate=", Rate(p.stream_rate), " loop=", Bytes(p.loop), "\n");
    }
  }
  for (const Expectation& e : s.expectations) {
    absl::StrAppend(&out, "expect ", ExpectationText(e), "\n");
  }
  return out;
}

const char* CompareOpText(CompareOp op) {
  switch (op) {
    case CompareOp::kLess:
      return "<";
    case CompareOp::kLessEqual:
      return "<=";
    case CompareOp::kGreater:
      return ">";
    case CompareOp::kGreaterEqual:
      return ">=";
    case CompareOp::kEqual:
      return "==";
  }
  return "==";
}

}  // namespace plimsoll::sim
