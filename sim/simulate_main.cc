// simulate: plays policies against scenario files and reports, plots and checks the outcome.
//
//   bazel run //sim:simulate                                  # every bundled scenario, 3 policies
//   bazel run //sim:simulate -- --scenarios=sim/scenarios/lab_trio.scenario
//       --policies=pagecache,mom --svg_dir=/tmp/plots --guests       (one command line)
//
// The scenario corpus (sim/corpus.h, docs/policy.md "Scenario corpus"):
//
//   bazel run //sim:simulate -- --corpus --seed=1 --count=200 --policies=pagecache,mom,proxmox
//       --json=/tmp/corpus1.json            # tables on stdout, every case's measures as JSON
//   bazel run //sim:simulate -- --seed=1 --print_scenario=42 > /tmp/seed1_042.scenario
//   bazel run //sim:simulate -- --scenarios=/tmp/seed1_042.scenario --policies=pagecache,oracle
//
// Relative paths are taken from the workspace (bazel run) or the current directory. Exits 1
// when --check is set and an expectation fails, 2 on bad input.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "sim/corpus.h"
#include "sim/corpus_report.h"
#include "sim/expectations.h"
#include "sim/report.h"
#include "sim/runner.h"
#include "sim/scenario.h"
#include "sim/scenario_generator.h"
#include "sim/svg_plot.h"

ABSL_FLAG(std::string, scenarios, "",
          "comma-separated scenario files; empty: every sim/scenarios/*.scenario");
ABSL_FLAG(std::string, policies, "pagecache,mom,proxmox",
          "comma-separated policy names (plimsolld's, or oracle: the simulator's limit)");
ABSL_FLAG(std::string, svg_dir, "", "write <scenario>.<policy>.svg plots here");
ABSL_FLAG(bool, guests, false, "print a per-guest table for every run");
ABSL_FLAG(bool, check, true, "check the scenarios' expectations (policies they name are run too)");
ABSL_FLAG(bool, summary, false, "print each run's last policy summary line");
ABSL_FLAG(std::string, trace, "", "print every decision for the guest of this name");
ABSL_FLAG(bool, corpus, false,
          "play --policies and the oracle on --count generated cases of --seed instead of "
          "scenario files; print the summary tables (and write --json)");
ABSL_FLAG(uint64_t, seed, 1, "the corpus's seed (--corpus, --print_scenario)");
ABSL_FLAG(int, count, 200, "how many generated cases (--corpus): cases 0..count-1 of the seed");
ABSL_FLAG(std::string, json, "",
          "write the measures here as JSON: with --corpus every case's (sim/corpus_report.h), "
          "else every run's, per guest too (sim/report.h RunsJson)");
ABSL_FLAG(int, threads, 1, "with --corpus: cases played at once (the figures do not change)");
ABSL_FLAG(int, print_scenario, -1,
          "print generated case N of --seed as a scenario file and exit (replay it with "
          "--scenarios)");
ABSL_FLAG(bool, psi_total, true,
          "hand policies PSI's cumulative stall total; false: avg10 only, as a daemon that does "
          "not forward the total");
ABSL_FLAG(double, tick, 0,
          "decide every this many seconds instead of each scenario's own tick (0: the "
          "scenario's; the generated corpus ticks every 5 s)");
ABSL_FLAG(double, stats_period, 0,
          "every guest reports its stats every this many seconds instead of its own stats_period "
          "(0: each guest's; the generated corpus draws 2, 5 or 10 s)");
ABSL_FLAG(double, block_stats_interval, 5,
          "read the guests' disk reads at most this often (seconds), as plimsolld's "
          "block_stats_interval (default 5 s); 0: at every decision");
ABSL_FLAG(std::string, balloon_pressure, "off",
          "whether the guests' kernels send the balloon driver's pressure counters (oom_kill, "
          "allocstall, pgscan_direct: Linux >= 6.12 on QEMU >= 9.2): off (none, whatever the "
          "scenario says: the figures as before the model had them), on (every guest), case (as "
          "each scenario's balloon_pressure= says; the generator gives them to one host in two)");

ABSL_FLAG(bool, in_guest_reclaim, false,
          "in-guest reclaim (docs/instruments.md \"In-guest reclaim in the model\"): plimsolld "
          "sends the agents reclaim bounds, every guest's balloon reports free pages (a guest costs "
          "the host its RSS), and the agents reclaim page cache down to the keep plimsolld names; "
          "with --corpus the oracle and the limit play without it. false: the runs as before the "
          "model had it");

ABSL_FLAG(std::string, read_drift, "case",
          "whether the guests' readers' pace wanders with their neighbours: case (as each "
          "scenario's read_drift= says; the generator gives it to four hosts in five), off (steady "
          "readers: the figures as before the model had the drift)");

namespace {

namespace fs = std::filesystem;

// A path as the user meant it: relative to the workspace under `bazel run`.
std::string Resolve(const std::string& path) {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (workspace == nullptr || fs::path(path).is_absolute()) return path;
  return (fs::path(workspace) / path).string();
}

std::vector<std::string> BundledScenarios() {
  std::vector<std::string> files;
  for (const std::string& dir : {std::string("sim/scenarios"), Resolve("sim/scenarios")}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".scenario") files.push_back(entry.path().string());
    }
    if (!files.empty()) break;
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The run options the flags set, for scenarios and the corpus alike; main checks
// --balloon_pressure first.
plimsoll::sim::RunOptions CommandRunOptions() {
  plimsoll::sim::RunOptions options;
  if (const std::string p = absl::GetFlag(FLAGS_balloon_pressure); p != "case") {
    options.balloon_pressure = p == "on";
  }
  options.steady_reads = absl::GetFlag(FLAGS_read_drift) == "off";
  options.in_guest_reclaim = absl::GetFlag(FLAGS_in_guest_reclaim);
  options.omit_psi_total = !absl::GetFlag(FLAGS_psi_total);
  options.block_stats_interval = absl::GetFlag(FLAGS_block_stats_interval);
  options.tick_seconds = absl::GetFlag(FLAGS_tick);
  options.stats_period = absl::GetFlag(FLAGS_stats_period);
  return options;
}

// --corpus: the summary tables on stdout, the JSON to --json, the wall time last.
int RunCorpusCommand(const std::vector<std::string>& policies) {
  using namespace plimsoll::sim;
  const auto start = std::chrono::steady_clock::now();
  const int count = absl::GetFlag(FLAGS_count);
  absl::StatusOr<CorpusRun> run =
      RunCorpus(absl::GetFlag(FLAGS_seed), count, policies, absl::GetFlag(FLAGS_threads),
                [count](int done) {
                  if (done % 20 == 0 || done == count) {
                    std::cerr << "corpus: " << done << "/" << count << " cases\n";
                  }
                },
                CommandRunOptions());
  if (!run.ok()) {
    std::cerr << run.status().message() << "\n";
    return 2;
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (absl::GetFlag(FLAGS_in_guest_reclaim)) {
    std::cout << "In-guest reclaim on for the policies (the oracle and the limit play without "
                 "it).\n";
  }
  std::cout << FormatCorpusTables(*run);
  if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
    std::ofstream out(Resolve(json));
    out << CorpusJson(*run);
    if (!out) {
      std::cerr << "cannot write " << Resolve(json) << "\n";
      return 2;
    }
    std::cout << "\nJSON: " << Resolve(json) << "\n";
  }
  std::cout << absl::StrFormat("\nwall time: %.1f s (%d thread(s))\n", wall,
                               std::max(1, absl::GetFlag(FLAGS_threads)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using namespace plimsoll::sim;
  if (const std::string p = absl::GetFlag(FLAGS_balloon_pressure);
      p != "on" && p != "off" && p != "case") {
    std::cerr << "--balloon_pressure: unknown \"" << p << "\" (known: on, off, case)\n";
    return 2;
  }
  if (const std::string d = absl::GetFlag(FLAGS_read_drift); d != "case" && d != "off") {
    std::cerr << "--read_drift: unknown \"" << d << "\" (known: case, off)\n";
    return 2;
  }
  if (const int index = absl::GetFlag(FLAGS_print_scenario); index >= 0) {
    std::cout << FormatScenario(GenerateScenario(absl::GetFlag(FLAGS_seed), index));
    return 0;
  }
  if (absl::GetFlag(FLAGS_corpus)) {
    return RunCorpusCommand(absl::StrSplit(absl::GetFlag(FLAGS_policies), ',', absl::SkipEmpty()));
  }
  std::vector<std::string> files;
  for (absl::string_view f : absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty())) {
    files.push_back(Resolve(std::string(f)));
  }
  if (files.empty()) files = BundledScenarios();
  if (files.empty()) {
    std::cerr << "no scenario files (pass --scenarios)\n";
    return 2;
  }
  const std::vector<std::string> policies =
      absl::StrSplit(absl::GetFlag(FLAGS_policies), ',', absl::SkipEmpty());
  const std::string svg_dir = absl::GetFlag(FLAGS_svg_dir).empty()
                                  ? std::string()
                                  : Resolve(absl::GetFlag(FLAGS_svg_dir));
  std::vector<RunResult> all;
  all.reserve(files.size() * (policies.size() + 2));
  int failed = 0;
  std::string checks;
  for (const std::string& file : files) {
    absl::StatusOr<Scenario> scenario = LoadScenarioFile(file);
    if (!scenario.ok()) {
      std::cerr << scenario.status().message() << "\n";
      return 2;
    }
    std::vector<std::string> to_run = policies;
    if (absl::GetFlag(FLAGS_check)) {
      for (const std::string& p : PoliciesNamed(*scenario)) {
        if (std::find(to_run.begin(), to_run.end(), p) == to_run.end()) to_run.push_back(p);
      }
    }
    std::map<std::string, RunResult> runs;
    for (const std::string& policy : to_run) {
      RunOptions options = CommandRunOptions();
      options.trace_guest = absl::GetFlag(FLAGS_trace);
      absl::StatusOr<RunResult> run = RunScenario(*scenario, policy, options);
      if (!run.ok()) {
        std::cerr << run.status().message() << "\n";
        return 2;
      }
      if (!svg_dir.empty()) {
        std::error_code ec;
        fs::create_directories(svg_dir, ec);
        const std::string path =
            (fs::path(svg_dir) / absl::StrCat(scenario->name, ".", policy, ".svg")).string();
        std::ofstream(path) << RenderSvg(*scenario, *run);
      }
      runs[policy] = *run;
      if (std::find(policies.begin(), policies.end(), policy) != policies.end()) {
        all.push_back(*run);
      }
    }
    if (absl::GetFlag(FLAGS_check)) {
      for (const ExpectationOutcome& o : CheckExpectations(*scenario, runs)) {
        absl::StrAppend(&checks, scenario->name, " ", o.message, "\n");
        if (!o.ok) ++failed;
      }
    }
  }
  std::vector<const RunResult*> rows;
  for (const RunResult& r : all) rows.push_back(&r);
  std::cout << FormatRunsTable(rows);
  if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
    std::ofstream out(Resolve(json));
    out << RunsJson(rows);
    if (!out) {
      std::cerr << "cannot write " << Resolve(json) << "\n";
      return 2;
    }
  }
  for (const RunResult& r : all) {
    if (absl::GetFlag(FLAGS_guests)) std::cout << "\n" << r.scenario << "\n" << FormatGuestsTable(r);
    for (const std::string& line : r.trace) std::cout << r.policy << " " << line << "\n";
    if (absl::GetFlag(FLAGS_summary)) {
      std::cout << r.scenario << " " << r.policy << ": " << r.last_summary << "\n";
    }
  }
  if (!checks.empty()) std::cout << "\nexpectations:\n" << checks;
  if (failed > 0) {
    std::cout << failed << " expectation(s) FAILED\n";
    return 1;
  }
  return 0;
}
