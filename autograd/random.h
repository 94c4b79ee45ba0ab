#pragma once
// Generator: the one source of randomness (initialisation, dropout, data). xoshiro256** seeded through
// splitmix64, with our own uniform/normal transforms, so a seed gives the same numbers on every platform
// (the standard library's distributions are implementation-defined and do not).
#include <array>
#include <cstdint>

namespace tapegrad {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);

  uint64_t next_u64();
  /// Uniform in [0, 1) with 53 random bits.
  double uniform();
  /// Uniform in [0, 1) with 24 random bits: every float32 value it yields is exact.
  float uniform_float();
  /// Uniform integer in [0, n), unbiased (rejection sampling).
  uint64_t below(uint64_t n);
  /// Standard normal by the Marsaglia polar method (needs only log and sqrt).
  double normal();
  /// True with probability p.
  bool bernoulli(double p) { return uniform() < p; }

  /// Everything needed to continue the stream exactly (saved in checkpoints).
  struct State {
    std::array<uint64_t, 4> words;
    bool has_spare_normal;
    double spare_normal;
  };
  State state() const { return {s_, has_spare_, spare_}; }
  void set_state(const State& state) {
    s_ = state.words;
    has_spare_ = state.has_spare_normal;
    spare_ = state.spare_normal;
  }

 private:
  std::array<uint64_t, 4> s_{};
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace tapegrad
