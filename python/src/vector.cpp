// _shardgym.VectorEnv: env/vector_env.h's VectorEnv (N envs stepped on C++ threads, autoreset)
// with every per-env result gathered into one numpy array in C++, so a Python step costs
// one call whatever N is.
#include <algorithm>
#include <memory>
#include <stdexcept>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"

#include "env/registry.h"
#include "env/vector_env.h"
#include "runtime/core/training_run.h"

namespace shardgym::py {
namespace {

class PyVectorEnv {
 public:
  PyVectorEnv(const std::string& id, const ExperimentSpec& spec, int num_envs, int threads)
      : envs_(
            num_envs, [&](int) { return make_env(id, spec); }, threads) {
    const EnvSpec& s = envs_.spec();
    dim_ = static_cast<size_t>(s.observation_space.flat_size());
    blocks_ = static_cast<size_t>(s.num_blocks);
    actions_ = s.action_space.nvec.size();
  }

  int size() const { return envs_.size(); }
  nb::dict spec() { return spec_to_dict(envs_.spec(), envs_.env(0).run()); }

  // {"obs": (N, D) float32, "plan": (N, B) int32, "action_mask": (N, M) bool}
  nb::dict reset(uint64_t seed) {
    std::vector<Observation> obs;
    {
      nb::gil_scoped_release release;
      obs = envs_.reset(seed);
    }
    nb::dict d;
    d["obs"] = stack(obs);
    d["plan"] = plans();
    d["action_mask"] = masks();
    return d;
  }

  // actions (N, A) int32 → {"obs", "reward" (N) float64, "terminated", "truncated" (N) bool,
  // "plan", "action_mask", "final_obs" (N, D) and "final_plan" (N, B) (the last observation
  // and plan of envs that ended this step; rows of the others are 0),
  // "error" (N strings, "" when the step did not fail)}. obs, plan and mask are those after
  // autoreset.
  nb::dict step(nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> actions) {
    const size_t n = static_cast<size_t>(size());
    if (actions.shape(0) != n || actions.shape(1) != actions_) {
      throw std::invalid_argument("VectorEnv.step: actions must have shape (" + std::to_string(n) +
                                  ", " + std::to_string(actions_) + ")");
    }
    std::vector<Action> acts(n);
    for (size_t i = 0; i < n; ++i) {
      acts[i].assign(actions.data() + i * actions_, actions.data() + (i + 1) * actions_);
    }
    VectorStep r;
    {
      nb::gil_scoped_release release;
      r = envs_.step(acts);
    }
    std::vector<Observation> finals(n);
    std::vector<int32_t> final_plans(n * blocks_, 0);
    std::vector<std::string> errors(n);
    for (size_t i = 0; i < n; ++i) {
      if (!r.final_obs[i].empty()) {
        const std::vector<int32_t>& p = r.infos[i].plan_indices;
        std::copy_n(p.begin(), std::min(p.size(), blocks_), &final_plans[i * blocks_]);
      }
      finals[i] = r.final_obs[i].empty() ? Observation(dim_, 0.0f) : std::move(r.final_obs[i]);
      errors[i] = r.infos[i].error;
    }
    nb::dict d;
    d["obs"] = stack(r.obs);
    d["reward"] = to_numpy(std::move(r.rewards), {n});
    d["terminated"] = to_numpy_bool(r.terminated, {n});
    d["truncated"] = to_numpy_bool(r.truncated, {n});
    d["final_obs"] = stack(finals);
    d["final_plan"] = to_numpy(std::move(final_plans), {n, blocks_});
    d["plan"] = plans();
    d["action_mask"] = masks();
    d["error"] = errors;
    return d;
  }

  nb::object masks() const {
    std::vector<std::vector<uint8_t>> m;
    {
      nb::gil_scoped_release release;
      m = envs_.action_masks();
    }
    const size_t width = m.empty() ? 0 : m.front().size();
    std::vector<uint8_t> flat;
    flat.reserve(m.size() * width);
    for (const auto& row : m) flat.insert(flat.end(), row.begin(), row.end());
    return nb::cast(to_numpy_bool(flat, {m.size(), width}));
  }

 private:
  nb::object stack(const std::vector<Observation>& obs) const {
    std::vector<float> flat(obs.size() * dim_);
    for (size_t i = 0; i < obs.size(); ++i)
      std::copy(obs[i].begin(), obs[i].end(), &flat[i * dim_]);
    return nb::cast(to_numpy(std::move(flat), {obs.size(), dim_}));
  }

  // The plan in force of every env, as catalog indices (-1: not in the catalog).
  nb::object plans() {
    const size_t n = static_cast<size_t>(size());
    std::vector<int32_t> flat(n * blocks_, -1);
    for (size_t i = 0; i < n; ++i) {
      const TrainingRun& run = envs_.env(static_cast<int>(i)).run();
      const Plan& plan = run.plan();
      for (size_t b = 0; b < blocks_ && b < static_cast<size_t>(plan.size()); ++b) {
        flat[i * blocks_ + b] = run.catalog().index_of(plan.blocks[b]);
      }
    }
    return nb::cast(to_numpy(std::move(flat), {n, blocks_}));
  }

  VectorEnv envs_;
  size_t dim_ = 0, blocks_ = 0, actions_ = 0;
};

}  // namespace

void bind_vector(nb::module_& m) {
  nb::class_<PyVectorEnv>(m, "VectorEnv",
                          "N envs stepped together on C++ threads (autoreset), numpy results")
      .def(nb::init<const std::string&, const ExperimentSpec&, int, int>(), nb::arg("id"),
           nb::arg("experiment"), nb::arg("num_envs"), nb::arg("threads") = 0)
      .def("__len__", &PyVectorEnv::size)
      .def("spec", &PyVectorEnv::spec)
      .def("reset", &PyVectorEnv::reset, nb::arg("seed"))
      .def("step", &PyVectorEnv::step, nb::arg("actions"))
      .def("action_masks", &PyVectorEnv::masks);
}

}  // namespace shardgym::py
