// A small, fixed pseudo-random generator for the scenario generator: SplitMix64 (Steele, Lea
// and Flood, "Fast splittable pseudorandom number generators", 2014) with distributions
// written here. std::uniform_*_distribution is not used because its output differs between
// standard libraries; this gives the same numbers everywhere. The distributions use only
// IEEE-exact arithmetic (no log or exp, whose last bit libms may disagree on).
//
// Not thread-safe; cheap to copy. Not for cryptography.
#ifndef PLIMSOLL_SIM_RNG_H_
#define PLIMSOLL_SIM_RNG_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace plimsoll::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  // An independent stream for item `index` of the run seeded `seed`: the same whatever other
  // items are drawn, so that case i of seed N does not depend on how many cases are generated.
  static Rng ForItem(uint64_t seed, uint64_t index) {
    return Rng(Mix(Mix(seed) ^ (index * 0xD1B54A32D192ED03ULL + 0x8CB92BA72F3D8DD7ULL)));
  }

  uint64_t Next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return Mix(state_);
  }

  // [0, 1), from the top 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * (1.0 / 9007199254740992.0); }

  // [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

  // [lo, hi], inclusive; lo <= hi. Multiply-shift on 32 bits: bias under 2^-32 per value.
  int64_t Int(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    const uint64_t r = Next() >> 32;
    return lo + static_cast<int64_t>((r * span) >> 32);
  }

  // True with probability p.
  bool Chance(double p) { return Uniform() < p; }

  // One of `items`, uniformly; items must not be empty.
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[static_cast<size_t>(Int(0, static_cast<int64_t>(items.size()) - 1))];
  }

  // An index into `weights` (non-negative, not all zero), with probability proportional to it.
  size_t Weighted(const std::vector<double>& weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = Uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;
  }

 private:
  // SplitMix64's finaliser (a bijection on 64 bits).
  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  uint64_t state_;
};

}  // namespace plimsoll::sim

#endif  // PLIMSOLL_SIM_RNG_H_
