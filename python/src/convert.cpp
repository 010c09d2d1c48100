#include "convert.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

namespace shardgym::py {

nb::ndarray<nb::numpy, bool> to_numpy_bool(const std::vector<uint8_t>& v,
                                           std::initializer_list<size_t> shape) {
  // numpy's bool is one byte 0/1: normalise the mask's bytes into an owned buffer.
  auto* owned = new std::vector<uint8_t>(v.size());
  for (size_t i = 0; i < v.size(); ++i) (*owned)[i] = v[i] != 0;
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  return nb::ndarray<nb::numpy, bool>(reinterpret_cast<bool*>(owned->data()), shape, owner);
}

nb::dict info_to_dict(const Info& info) {
  nb::dict d;
  d["plan_indices"] = to_numpy(info.plan_indices, {info.plan_indices.size()});
  d["plan"] = info.plan.to_string();
  d["error"] = info.error;
  d["scalars"] = info.scalars;
  const Measurement& m = info.measurement;
  d["ok"] = m.ok;
  d["oom"] = m.oom;
  d["step_latency_s"] = m.step_latency_s;
  d["repartition_s"] = m.repartition_s;
  d["energy_j"] = m.energy_j;
  d["tokens"] = m.tokens;
  d["throughput"] = m.throughput();
  d["peak_memory_bytes"] = to_numpy(m.peak_memory_bytes, {m.peak_memory_bytes.size()});
  return d;
}

}  // namespace shardgym::py
