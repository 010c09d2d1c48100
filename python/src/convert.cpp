#include "convert.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

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
  d["repartition_bytes"] = m.repartition_bytes;
  d["repartition_peak_bytes"] = m.repartition_peak_bytes;  // memory in transit, largest rank
  d["energy_j"] = m.energy_j;
  d["tokens"] = m.tokens;
  d["throughput"] = m.throughput();
  d["peak_memory_bytes"] = to_numpy(m.peak_memory_bytes, {m.peak_memory_bytes.size()});
  return d;
}

nb::dict spec_to_dict(const EnvSpec& s, const TrainingRun& run) {
  nb::dict d;
  d["id"] = s.id;
  d["description"] = s.description;
  d["backend"] = s.backend;
  d["num_blocks"] = s.num_blocks;
  d["catalog_size"] = s.catalog_size;
  d["pipeline_stages"] = s.pipeline_stages;
  d["share_groups"] = s.share_groups;
  d["max_episode_steps"] = s.max_episode_steps;
  d["deterministic"] = s.deterministic;
  d["observation_size"] = s.observation_space.flat_size();
  d["action_nvec"] = s.action_space.nvec;
  nb::list parts;
  for (const ObservationPart& p : s.observation_parts) {
    nb::dict part;
    part["name"] = p.name;
    part["offset"] = p.offset;
    part["shape"] = nb::tuple(nb::cast(p.shape));
    part["meaning"] = p.meaning;
    parts.append(part);
  }
  d["observation_parts"] = parts;
  std::vector<std::string> catalog;
  for (int k = 0; k < run.catalog().size(); ++k) catalog.push_back(run.catalog().at(k).to_string());
  d["catalog"] = catalog;
  return d;
}

}  // namespace shardgym::py
