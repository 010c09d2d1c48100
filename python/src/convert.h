// C++ → Python conversions of the extension: owned numpy arrays (no copy after the C++
// result is moved in) and the env's Info as a dict.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "env/env.h"
#include "runtime/core/training_run.h"

namespace shardgym::py {

namespace nb = nanobind;

// A numpy array that owns `v` (moved to the heap, freed with the array).
template <typename T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T> v, std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(v));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape, owner);
}

// uint8 0/1 → numpy bool.
nb::ndarray<nb::numpy, bool> to_numpy_bool(const std::vector<uint8_t>& v,
                                           std::initializer_list<size_t> shape);

// Info → {"plan_indices", "plan", "error", "scalars", measurement figures ...}.
nb::dict info_to_dict(const Info& info);

// EnvSpec (+ the run's catalog) → {"id", "num_blocks", "catalog_size", "action_nvec",
// "observation_parts", "catalog", ...}: what the Python side builds its spaces from.
nb::dict spec_to_dict(const EnvSpec& spec, const TrainingRun& run);

}  // namespace shardgym::py
