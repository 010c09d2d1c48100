// Spaces as data (Gymnasium semantics; EnvPool's EnvSpec / CompilerGym's ObservationSpace):
// a plain struct naming dtype, shape and bounds, plus whether values are deterministic and
// portable. Live latency is neither, so its spaces say so.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace shardgym {

enum class SpaceKind { kDiscrete, kMultiDiscrete, kBox, kDict };

struct Space {
  std::string name;
  SpaceKind kind = SpaceKind::kBox;
  std::string dtype = "float32";  // "int32" for (Multi)Discrete
  std::vector<int64_t> shape;
  std::vector<int64_t> nvec;      // (Multi)Discrete: choices per dimension
  double low = 0, high = 0;       // Box bounds (same for every element)
  std::vector<Space> children;    // Dict
  bool deterministic = true;
  bool platform_dependent = false;

  static Space discrete(std::string name, int64_t n);
  static Space multi_discrete(std::string name, std::vector<int64_t> nvec);
  static Space box(std::string name, std::vector<int64_t> shape, double low, double high);
  static Space dict(std::string name, std::vector<Space> children);

  int64_t flat_size() const;
  // Membership: shape and bounds (ints for discrete kinds).
  bool contains(const std::vector<float>& x) const;
  bool contains(const std::vector<int32_t>& x) const;
  // A uniform sample; for MultiDiscrete with a mask (flattened dims × max(nvec), or the
  // dimensions' masks concatenated, sum(nvec) entries), only entries with mask 1 are drawn.
  std::vector<int32_t> sample(std::mt19937_64& rng,
                              const std::vector<uint8_t>* mask = nullptr) const;
  std::string to_string() const;
};

}  // namespace shardgym
