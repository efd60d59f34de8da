#include "agent/guest_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/small_file.h"
#include "protocol/report_proof.h"

namespace plimsoll::agent {
namespace {

std::string WithoutTrailingSlash(std::string root) {
  while (!root.empty() && root.back() == '/') root.pop_back();
  return root;
}

// Sums that never wrap: a kernel's counters are far below 2^64, but the parser admits any
// uint64, and a wrapped sum would look like a counter going backwards.
uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

// A sum over several vmstat lines that stays "absent" until one of its parts is seen.
class Sum {
 public:
  void Add(uint64_t v) { value_ = SaturatingAdd(value_.value_or(0), v); }
  std::optional<uint64_t> value() const { return value_; }

 private:
  std::optional<uint64_t> value_;
};

// True for `name` == `base` and for `base` + "_" + anything (per-zone variants of old kernels:
// pgscan_kswapd_normal, allocstall_dma32, ...).
bool IsFamily(absl::string_view name, absl::string_view base) {
  if (!absl::StartsWith(name, base)) return false;
  return name.size() == base.size() || name[base.size()] == '_';
}

template <typename Setter>
void SetIfPresent(std::optional<uint64_t> v, Setter set) {
  if (v.has_value()) set(*v);
}

void FillPsiLine(const PsiLine& line, v1::PsiLine* out) {
  out->set_avg10(line.avg10);
  out->set_avg60(line.avg60);
  out->set_avg300(line.avg300);
  out->set_total_us(line.total_us);
}

}  // namespace

void FillMeminfo(const Meminfo& meminfo, v1::GuestMeminfo* out) {
  out->Clear();
  // The parser stores kB lines in bytes as int64 and rejects negatives, so the casts are exact.
  auto set = [&meminfo](absl::string_view name, auto setter) {
    if (std::optional<int64_t> v = meminfo.Bytes(name); v.has_value()) setter(static_cast<uint64_t>(*v));
  };
  set("MemTotal", [out](uint64_t v) { out->set_mem_total_bytes(v); });
  set("MemFree", [out](uint64_t v) { out->set_mem_free_bytes(v); });
  set("MemAvailable", [out](uint64_t v) { out->set_mem_available_bytes(v); });
  set("Buffers", [out](uint64_t v) { out->set_buffers_bytes(v); });
  set("Cached", [out](uint64_t v) { out->set_cached_bytes(v); });
  set("Active(file)", [out](uint64_t v) { out->set_active_file_bytes(v); });
  set("Inactive(file)", [out](uint64_t v) { out->set_inactive_file_bytes(v); });
  set("AnonPages", [out](uint64_t v) { out->set_anon_pages_bytes(v); });
  set("Shmem", [out](uint64_t v) { out->set_shmem_bytes(v); });
  set("SReclaimable", [out](uint64_t v) { out->set_sreclaimable_bytes(v); });
  set("SUnreclaim", [out](uint64_t v) { out->set_sunreclaim_bytes(v); });
  set("SwapTotal", [out](uint64_t v) { out->set_swap_total_bytes(v); });
  set("SwapFree", [out](uint64_t v) { out->set_swap_free_bytes(v); });
}

void FillVmstat(const Vmstat& vmstat, v1::GuestVmstat* out) {
  out->Clear();
  Sum scan_kswapd, scan_direct, scan_other, steal_kswapd, steal_direct, steal_other, allocstall;
  for (const auto& [name, value] : vmstat.values) {
    if (IsFamily(name, "pgscan_kswapd")) {
      scan_kswapd.Add(value);
    } else if (IsFamily(name, "pgscan_direct")) {
      // pgscan_direct_throttle counts throttling events, not scanned pages.
      if (name != "pgscan_direct_throttle") scan_direct.Add(value);
    } else if (IsFamily(name, "pgscan_khugepaged") || IsFamily(name, "pgscan_proactive")) {
      scan_other.Add(value);
    } else if (IsFamily(name, "pgsteal_kswapd")) {
      steal_kswapd.Add(value);
    } else if (IsFamily(name, "pgsteal_direct")) {
      steal_direct.Add(value);
    } else if (IsFamily(name, "pgsteal_khugepaged") || IsFamily(name, "pgsteal_proactive")) {
      steal_other.Add(value);
    } else if (IsFamily(name, "allocstall")) {
      allocstall.Add(value);
    }
  }
  auto total = [](const Sum& a, const Sum& b, const Sum& c) {
    Sum s;
    for (const Sum* part : {&a, &b, &c}) {
      if (part->value().has_value()) s.Add(*part->value());
    }
    return s.value();
  };

  // Before 5.9 only file pages had workingset detection, and the counter had no suffix.
  std::optional<uint64_t> refault_file = vmstat.Get("workingset_refault_file");
  if (!refault_file.has_value()) refault_file = vmstat.Get("workingset_refault");
  SetIfPresent(refault_file, [out](uint64_t v) { out->set_workingset_refault_file(v); });
  SetIfPresent(vmstat.Get("workingset_refault_anon"), [out](uint64_t v) { out->set_workingset_refault_anon(v); });
  SetIfPresent(vmstat.Get("pgmajfault"), [out](uint64_t v) { out->set_pgmajfault(v); });
  SetIfPresent(scan_kswapd.value(), [out](uint64_t v) { out->set_pgscan_kswapd(v); });
  SetIfPresent(scan_direct.value(), [out](uint64_t v) { out->set_pgscan_direct(v); });
  SetIfPresent(steal_kswapd.value(), [out](uint64_t v) { out->set_pgsteal_kswapd(v); });
  SetIfPresent(steal_direct.value(), [out](uint64_t v) { out->set_pgsteal_direct(v); });
  SetIfPresent(total(scan_kswapd, scan_direct, scan_other), [out](uint64_t v) { out->set_pgscan_total(v); });
  SetIfPresent(total(steal_kswapd, steal_direct, steal_other), [out](uint64_t v) { out->set_pgsteal_total(v); });
  SetIfPresent(vmstat.Get("balloon_inflate"), [out](uint64_t v) { out->set_balloon_inflate(v); });
  SetIfPresent(vmstat.Get("balloon_deflate"), [out](uint64_t v) { out->set_balloon_deflate(v); });
  SetIfPresent(vmstat.Get("oom_kill"), [out](uint64_t v) { out->set_oom_kill(v); });
  SetIfPresent(allocstall.value(), [out](uint64_t v) { out->set_allocstall(v); });
  SetIfPresent(vmstat.Get("pswpin"), [out](uint64_t v) { out->set_pswpin(v); });
  SetIfPresent(vmstat.Get("pswpout"), [out](uint64_t v) { out->set_pswpout(v); });
}

void FillPsi(const Psi& psi, v1::GuestPsi* out) {
  out->Clear();
  if (psi.some.has_value()) FillPsiLine(*psi.some, out->mutable_some());
  if (psi.full.has_value()) FillPsiLine(*psi.full, out->mutable_full());
}

absl::Status FillSample(const ProcTexts& texts, v1::AgentReport* report) {
  report->clear_meminfo();
  report->clear_vmstat();
  report->clear_memory_pressure();
  absl::StatusOr<Meminfo> meminfo = ParseMeminfo(texts.meminfo);
  if (!meminfo.ok()) return absl::InvalidArgumentError(absl::StrCat("meminfo: ", meminfo.status().message()));
  absl::StatusOr<Vmstat> vmstat = ParseVmstat(texts.vmstat);
  if (!vmstat.ok()) return absl::InvalidArgumentError(absl::StrCat("vmstat: ", vmstat.status().message()));
  std::optional<Psi> psi;
  if (texts.psi_memory.has_value()) {
    absl::StatusOr<Psi> parsed = ParsePsi(*texts.psi_memory);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("pressure/memory: ", parsed.status().message()));
    }
    psi = *std::move(parsed);
  }
  FillMeminfo(*meminfo, report->mutable_meminfo());
  FillVmstat(*vmstat, report->mutable_vmstat());
  // An empty PSI text (both lines absent) is as good as no PSI: leave the field unset.
  if (psi.has_value() && (psi->some.has_value() || psi->full.has_value())) {
    FillPsi(*psi, report->mutable_memory_pressure());
  }
  return absl::OkStatus();
}

GuestReader::GuestReader(std::string proc_root) : root_(WithoutTrailingSlash(std::move(proc_root))) {}

absl::Status GuestReader::Read(v1::AgentReport* report) {
  ProcTexts texts;
  absl::StatusOr<std::string> meminfo = ReadSmallFile(root_ + "/proc/meminfo", kMaxProcTextBytes);
  if (!meminfo.ok()) return meminfo.status();
  texts.meminfo = *std::move(meminfo);
  absl::StatusOr<std::string> vmstat = ReadSmallFile(root_ + "/proc/vmstat", kMaxProcTextBytes);
  if (!vmstat.ok()) return vmstat.status();
  texts.vmstat = *std::move(vmstat);
  const std::string psi_path = root_ + "/proc/pressure/memory";
  std::string psi;
  const int psi_error = ReadBoundedFile(psi_path, kMaxProcTextBytes, &psi);
  if (psi_error == 0) {
    if (psi.size() > kMaxProcTextBytes) {
      return absl::InvalidArgumentError(absl::StrCat(psi_path, ": larger than ", kMaxProcTextBytes, " bytes"));
    }
    texts.psi_memory = std::move(psi);
  } else if (psi_error != ENOENT && psi_error != EOPNOTSUPP) {
    // ENOENT: a kernel built without PSI; EOPNOTSUPP: PSI compiled in but off ("psi=0").
    // Anything else is a broken file and is reported.
    return absl::ErrnoToStatus(psi_error, absl::StrCat(psi_path, ": read failed"));
  }
  absl::Status status = FillSample(texts, report);
  if (!status.ok()) return absl::Status(status.code(), absl::StrCat(root_, "/proc/", status.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> GuestReader::ReadBootId() const {
  const std::string path = root_ + "/proc/sys/kernel/random/boot_id";
  absl::StatusOr<std::string> text = ReadSmallFile(path, 128);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::string> id = protocol::NormalizeUuid(*text);
  if (!id.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", id.status().message()));
  return id;
}

}  // namespace plimsoll::agent
