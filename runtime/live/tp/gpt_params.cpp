#include "runtime/live/tp/gpt_params.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace shardgym::live {

std::vector<ParamShard> full_param_specs(const ModelSpec& m) {
  std::vector<ParamShard> all, tail;
  for (ParamShard& s : outer_param_shards(m))  // wte, wpe first; ln_f, lm_head after the blocks
    (s.name == "wte" || s.name == "wpe" ? all : tail).push_back(std::move(s));
  const BlockPlacement whole = place_block(Strategy::dp(), 0, 1);
  for (int b = 0; b < m.num_blocks(); ++b)
    for (auto& s : block_param_shards(m, b, whole)) all.push_back(std::move(s));
  all.insert(all.end(), tail.begin(), tail.end());
  return all;
}

ParamMap init_gpt_params(const ModelSpec& m, at::ScalarType dtype, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const double std_proj = 0.02 / std::sqrt(2.0 * m.layers);
  ParamMap out;
  for (const ParamShard& s : full_param_specs(m)) {
    at::Tensor t;
    auto ends_with = [&](const std::string& suffix) {
      return s.name.size() >= suffix.size() &&
             s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    const bool is_bias = ends_with(".bias");
    if (ends_with("ln.weight") || s.name == "ln_f.weight") {  // LayerNorm and RMSNorm alike
      t = at::ones(s.full_shape, at::kDouble);
    } else if (is_bias) {
      t = at::zeros(s.full_shape, at::kDouble);
    } else {
      const bool proj = s.name.find("proj.weight") != std::string::npos ||
                        s.name.find("fc2.weight") != std::string::npos;
      t = at::empty(s.full_shape, at::kDouble);
      t.normal_(0.0, proj ? std_proj : 0.02, gen);
    }
    out[s.name] = t.to(dtype);
  }
  return out;
}

void check_full_params(const ModelSpec& m, const ParamMap& params) {
  const auto specs = full_param_specs(m);
  if (params.size() != specs.size()) {
    std::ostringstream msg;
    msg << "expected " << specs.size() << " parameters, got " << params.size();
    throw std::invalid_argument(msg.str());
  }
  for (const ParamShard& s : specs) {
    auto it = params.find(s.name);
    if (it == params.end()) throw std::invalid_argument("missing parameter " + s.name);
    if (it->second.sizes() != at::IntArrayRef(s.full_shape)) {
      std::ostringstream msg;
      msg << "parameter " << s.name << " has shape " << it->second.sizes() << ", expected "
          << at::IntArrayRef(s.full_shape);
      throw std::invalid_argument(msg.str());
    }
  }
}

}  // namespace shardgym::live
