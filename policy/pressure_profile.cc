#include "policy/pressure_profile.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace plimsoll::policy {
namespace {

// Buckets never exceed this many: a bucket_fraction below 1% is treated as 1%.
constexpr int kMaxBuckets = 100;

int BucketCount(const ProfileParams& p) {
  const double f = std::max(p.bucket_fraction, 1.0 / kMaxBuckets);
  return static_cast<int>(std::ceil(1.0 / f)) + 1;  // + 1: the ceiling itself
}

int BucketOf(double size_bytes, double ceiling_bytes, const ProfileParams& p) {
  if (!(ceiling_bytes > 0)) return 0;
  const double f = std::max(p.bucket_fraction, 1.0 / kMaxBuckets);
  const int i = static_cast<int>(std::floor(std::max(0.0, size_bytes) / (f * ceiling_bytes)));
  return std::clamp(i, 0, BucketCount(p) - 1);
}

// The excess of `now` over `ratio` times `reference` (which may be absent).
std::optional<double> Excess(const std::optional<double>& now, const std::optional<double>& reference,
                             double ratio) {
  if (!now.has_value()) return std::nullopt;
  if (!reference.has_value()) return now;
  return std::max(0.0, *now - ratio * *reference);
}

void TakeMin(const std::optional<double>& v, std::optional<double>* least) {
  if (v.has_value() && (!least->has_value() || *v < **least)) *least = v;
}

}  // namespace

PressureReading ReferencePressure(const ProfileMemory& m, double size_bytes, double ceiling_bytes,
                                  double now_s, const ProfileParams& p) {
  if (p.ratio <= 0) return PressureReading{};
  PressureReading least;
  for (int i = BucketOf(size_bytes, ceiling_bytes, p) + 1; i < static_cast<int>(m.buckets.size()); ++i) {
    const ProfileMemory::Bucket& b = m.buckets[i];
    if (now_s - b.at_s > p.forget_seconds) continue;
    TakeMin(b.reading.stall_pct, &least.stall_pct);
    TakeMin(b.reading.refault_bytes_per_s, &least.refault_bytes_per_s);
    TakeMin(b.reading.disk_bytes_per_s, &least.disk_bytes_per_s);
  }
  return least;
}

PressureReading ExcessPressure(const ProfileMemory& m, double size_bytes, double ceiling_bytes,
                               const PressureReading& r, double now_s, const ProfileParams& p) {
  if (p.ratio <= 0) return PressureReading{r.stall_pct, r.refault_bytes_per_s, std::nullopt};
  if (BucketOf(size_bytes, ceiling_bytes, p) == BucketCount(p) - 1) {
    // At the ceiling no larger size exists: whatever pressure is there, memory cannot relieve
    // it, and it is the reading smaller sizes are measured against.
    auto zero = [](const std::optional<double>& v) { return v.has_value() ? std::optional<double>(0) : v; };
    return PressureReading{zero(r.stall_pct), zero(r.refault_bytes_per_s), std::nullopt};
  }
  const PressureReading reference = ReferencePressure(m, size_bytes, ceiling_bytes, now_s, p);
  PressureReading out;
  out.stall_pct = Excess(r.stall_pct, reference.stall_pct, p.ratio);
  out.refault_bytes_per_s = Excess(r.refault_bytes_per_s, reference.refault_bytes_per_s, p.ratio);
  // Disk reads are pressure only against a larger size's: alone they are just reading.
  if (r.disk_bytes_per_s.has_value() && reference.disk_bytes_per_s.has_value()) {
    out.disk_bytes_per_s = Excess(r.disk_bytes_per_s, reference.disk_bytes_per_s, p.ratio);
  }
  return out;
}

void RecordPressure(ProfileMemory* m, double size_bytes, double ceiling_bytes,
                    const PressureReading& r, double now_s, const ProfileParams& p) {
  if (p.ratio <= 0) return;
  if (static_cast<int>(m->buckets.size()) != BucketCount(p)) m->buckets.assign(BucketCount(p), {});
  for (ProfileMemory::Bucket& b : m->buckets) {
    if (now_s - b.at_s > p.forget_seconds) b = ProfileMemory::Bucket();
  }
  ProfileMemory::Bucket& b = m->buckets[BucketOf(size_bytes, ceiling_bytes, p)];
  b.reading = r;
  b.at_s = now_s;
}

void ForgetDiskReadsBelow(ProfileMemory* m, double bytes_per_s) {
  for (ProfileMemory::Bucket& b : m->buckets) {
    if (b.reading.disk_bytes_per_s.has_value() && *b.reading.disk_bytes_per_s < bytes_per_s) {
      b.reading.disk_bytes_per_s.reset();
    }
  }
}

}  // namespace plimsoll::policy
