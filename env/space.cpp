#include "env/space.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace shardgym {
namespace {

// Unbiased draw in [0, n) by rejection; portable (std distributions are not bit-identical
// across standard libraries, and traces must replay the same everywhere).
int64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() -
                         std::numeric_limits<uint64_t>::max() % n;
  uint64_t r;
  do {
    r = rng();
  } while (r >= limit);
  return static_cast<int64_t>(r % n);
}

std::string format_bound(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os << v;
  return os.str();
}

const char* kind_name(SpaceKind kind) {
  switch (kind) {
    case SpaceKind::kDiscrete: return "Discrete";
    case SpaceKind::kMultiDiscrete: return "MultiDiscrete";
    case SpaceKind::kBox: return "Box";
    case SpaceKind::kDict: return "Dict";
  }
  return "?";
}

// Checks the flat_size() values at x against a leaf space (not a Dict).
template <typename T>
bool leaf_contains(const Space& s, const T* x) {
  const int64_t n = s.flat_size();
  for (int64_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(x[i]);
    if (s.kind == SpaceKind::kBox) {
      if (!(v >= s.low && v <= s.high)) return false;  // NaN fails too
      continue;
    }
    const int64_t choices = s.kind == SpaceKind::kDiscrete ? s.nvec.at(0) : s.nvec.at(i);
    if (!(v >= 0 && v < static_cast<double>(choices)) || v != std::floor(v)) return false;
  }
  return true;
}

template <typename T>
bool contains_at(const Space& s, const std::vector<T>& x, size_t* offset) {
  if (s.kind == SpaceKind::kDict) {
    for (const Space& c : s.children) {
      if (!contains_at(c, x, offset)) return false;
    }
    return true;
  }
  const auto n = static_cast<size_t>(s.flat_size());
  if (*offset + n > x.size()) return false;
  const bool ok = leaf_contains(s, x.data() + *offset);
  *offset += n;
  return ok;
}

template <typename T>
bool contains_all(const Space& s, const std::vector<T>& x) {
  if (static_cast<int64_t>(x.size()) != s.flat_size()) return false;
  size_t offset = 0;
  return contains_at(s, x, &offset);
}

}  // namespace

Space Space::discrete(std::string name, int64_t n) {
  if (n <= 0) throw std::invalid_argument("Space::discrete '" + name + "': n must be > 0");
  Space s;
  s.name = std::move(name);
  s.kind = SpaceKind::kDiscrete;
  s.dtype = "int32";
  s.nvec = {n};
  s.low = 0;
  s.high = static_cast<double>(n - 1);
  return s;
}

Space Space::multi_discrete(std::string name, std::vector<int64_t> nvec) {
  for (size_t i = 0; i < nvec.size(); ++i) {
    if (nvec[i] <= 0) {
      throw std::invalid_argument("Space::multi_discrete '" + name + "': nvec[" +
                                  std::to_string(i) + "] must be > 0");
    }
  }
  Space s;
  s.name = std::move(name);
  s.kind = SpaceKind::kMultiDiscrete;
  s.dtype = "int32";
  s.shape = {static_cast<int64_t>(nvec.size())};
  s.low = 0;
  int64_t max_n = 0;
  for (int64_t n : nvec) max_n = std::max(max_n, n);
  s.high = static_cast<double>(max_n - 1);
  s.nvec = std::move(nvec);
  return s;
}

Space Space::box(std::string name, std::vector<int64_t> shape, double low, double high) {
  if (!(low <= high)) {
    throw std::invalid_argument("Space::box '" + name + "': low must be <= high");
  }
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("Space::box '" + name + "': negative dimension");
  }
  Space s;
  s.name = std::move(name);
  s.kind = SpaceKind::kBox;
  s.dtype = "float32";
  s.shape = std::move(shape);
  s.low = low;
  s.high = high;
  return s;
}

Space Space::dict(std::string name, std::vector<Space> children) {
  Space s;
  s.name = std::move(name);
  s.kind = SpaceKind::kDict;
  s.dtype = "";
  s.children = std::move(children);
  for (const Space& c : s.children) {
    s.deterministic = s.deterministic && c.deterministic;
    s.platform_dependent = s.platform_dependent || c.platform_dependent;
  }
  return s;
}

int64_t Space::flat_size() const {
  switch (kind) {
    case SpaceKind::kDiscrete: return 1;
    case SpaceKind::kMultiDiscrete: return static_cast<int64_t>(nvec.size());
    case SpaceKind::kBox: {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      return n;
    }
    case SpaceKind::kDict: {
      int64_t n = 0;
      for (const Space& c : children) n += c.flat_size();
      return n;
    }
  }
  return 0;
}

bool Space::contains(const std::vector<float>& x) const { return contains_all(*this, x); }
bool Space::contains(const std::vector<int32_t>& x) const { return contains_all(*this, x); }

std::vector<int32_t> Space::sample(std::mt19937_64& rng, const std::vector<uint8_t>* mask) const {
  switch (kind) {
    case SpaceKind::kDiscrete:
    case SpaceKind::kMultiDiscrete: {
      const size_t dims = kind == SpaceKind::kDiscrete ? 1 : nvec.size();
      int64_t stride = 0, total = 0;
      for (int64_t n : nvec) stride = std::max(stride, n), total += n;
      // Padded rows (dims × max(nvec)) or the components' masks one after the other
      // (sum(nvec), sb3-contrib's layout and the env's); the two agree when nvec is uniform.
      const bool concatenated = mask && mask->size() == static_cast<size_t>(total);
      if (mask && !concatenated && mask->size() != dims * static_cast<size_t>(stride)) {
        throw std::invalid_argument("Space::sample '" + name + "': mask has " +
                                    std::to_string(mask->size()) + " entries, expected " +
                                    std::to_string(dims * stride) + " (dims x max(nvec)) or " +
                                    std::to_string(total) + " (sum(nvec))");
      }
      size_t offset = 0;
      std::vector<int32_t> out(dims);
      for (size_t d = 0; d < dims; ++d) {
        const int64_t n = nvec[d];
        if (!mask) {
          out[d] = static_cast<int32_t>(uniform_below(rng, static_cast<uint64_t>(n)));
          continue;
        }
        const uint8_t* row = mask->data() + (concatenated ? offset : d * stride);
        offset += static_cast<size_t>(n);
        int64_t allowed = 0;
        for (int64_t k = 0; k < n; ++k) allowed += row[k] ? 1 : 0;
        if (allowed == 0) {
          throw std::invalid_argument("Space::sample '" + name + "': dimension " +
                                      std::to_string(d) + " has no allowed value in the mask");
        }
        int64_t pick = uniform_below(rng, static_cast<uint64_t>(allowed));
        for (int64_t k = 0; k < n; ++k) {
          if (row[k] && pick-- == 0) {
            out[d] = static_cast<int32_t>(k);
            break;
          }
        }
      }
      return out;
    }
    case SpaceKind::kDict: {
      if (mask) throw std::invalid_argument("Space::sample '" + name + "': no mask for a Dict");
      std::vector<int32_t> out;
      for (const Space& c : children) {
        std::vector<int32_t> part = c.sample(rng);
        out.insert(out.end(), part.begin(), part.end());
      }
      return out;
    }
    case SpaceKind::kBox:
      break;
  }
  throw std::invalid_argument("Space::sample '" + name +
                              "': only Discrete, MultiDiscrete and Dicts of them draw int32 "
                              "values; a Box is an observation space");
}

std::string Space::to_string() const {
  std::ostringstream os;
  os << kind_name(kind) << "(";
  switch (kind) {
    case SpaceKind::kDiscrete:
      os << nvec.at(0);
      break;
    case SpaceKind::kMultiDiscrete: {
      bool same = !nvec.empty();
      for (int64_t n : nvec) same = same && n == nvec.front();
      if (same && nvec.size() > 4) {
        os << nvec.size() << "*[" << nvec.front() << "]";
      } else {
        os << "[";
        for (size_t i = 0; i < nvec.size(); ++i) os << (i ? ", " : "") << nvec[i];
        os << "]";
      }
      break;
    }
    case SpaceKind::kBox: {
      os << format_bound(low) << ", " << format_bound(high) << ", (";
      for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
      os << (shape.size() == 1 ? ",)" : ")") << ", " << dtype;
      break;
    }
    case SpaceKind::kDict:
      for (size_t i = 0; i < children.size(); ++i) {
        os << (i ? ", " : "") << children[i].name << ": " << children[i].to_string();
      }
      break;
  }
  if (kind != SpaceKind::kDict) {
    if (!deterministic) os << ", deterministic=false";
    if (platform_dependent) os << ", platform_dependent=true";
  }
  os << ")";
  return os.str();
}

}  // namespace shardgym
