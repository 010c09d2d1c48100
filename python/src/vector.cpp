// _shardgym.VectorEnv: env/vector_env.h's VectorEnv (N envs stepped on C++ threads, autoreset)
// with every per-env result written by the env's thread straight into the buffer of the
// numpy array returned (VectorEnv::step_into), so a Python step costs one call whatever N is
// and each result is copied once.
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

// A zeroed buffer that a numpy array will own (no copy when it is handed over).
template <typename T>
struct Owned {
  explicit Owned(size_t n) : v(new std::vector<T>(n)) {}
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { delete v; }
  T* data() { return v->data(); }
  // The numpy array; the buffer is the array's from now on. `As` reinterprets the elements
  // (uint8 0/1 as numpy bool).
  template <typename As = T>
  nb::object release(std::initializer_list<size_t> shape) {
    std::vector<T>* owned = v;
    v = nullptr;
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, As>(reinterpret_cast<As*>(owned->data()), shape, owner));
  }
  std::vector<T>* v;
};

class PyVectorEnv {
 public:
  PyVectorEnv(const std::string& id, const ExperimentSpec& spec, int num_envs, int threads)
      : envs_(
            num_envs, [&](int) { return make_env(id, spec); }, threads) {
    const EnvSpec& s = envs_.spec();
    n_ = static_cast<size_t>(envs_.size());
    dim_ = static_cast<size_t>(envs_.observation_size());
    blocks_ = static_cast<size_t>(s.num_blocks);
    actions_ = static_cast<size_t>(envs_.action_size());
    mask_ = static_cast<size_t>(envs_.mask_size());
  }

  int size() const { return envs_.size(); }
  nb::dict spec() { return spec_to_dict(envs_.spec(), envs_.env(0).run()); }

  // {"obs": (N, D) float32, "plan": (N, B) int32, "action_mask": (N, M) bool}
  nb::dict reset(uint64_t seed) {
    Owned<float> obs(n_ * dim_);
    Owned<int32_t> plan(n_ * blocks_);
    Owned<uint8_t> mask(n_ * mask_);
    VectorBuffers out;
    out.obs = obs.data(), out.plan = plan.data(), out.mask = mask.data();
    {
      nb::gil_scoped_release release;
      envs_.reset_into(seed, out);
    }
    nb::dict d;
    d["obs"] = obs.release({n_, dim_});
    d["plan"] = plan.release({n_, blocks_});
    d["action_mask"] = mask.release<bool>({n_, mask_});
    return d;
  }

  // actions (N, A) int32 → {"obs", "reward" (N) float64, "terminated", "truncated" (N) bool,
  // "plan", "action_mask", "final_obs" (N, D) and "final_plan" (N, B) (the last observation
  // and plan of envs that ended this step; rows of the others are 0),
  // "error" (N strings, "" when the step did not fail)}. obs, plan and mask are those after
  // autoreset. Every array is filled by the envs' threads in place (VectorEnv::step_into).
  nb::dict step(nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> actions) {
    if (actions.shape(0) != n_ || actions.shape(1) != actions_) {
      throw std::invalid_argument("VectorEnv.step: actions must have shape (" + std::to_string(n_) +
                                  ", " + std::to_string(actions_) + ")");
    }
    Owned<float> obs(n_ * dim_), final_obs(n_ * dim_);
    Owned<int32_t> plan(n_ * blocks_), final_plan(n_ * blocks_);
    Owned<uint8_t> mask(n_ * mask_), terminated(n_), truncated(n_);
    Owned<double> reward(n_);
    std::vector<std::string> errors;
    VectorBuffers out;
    out.obs = obs.data(), out.plan = plan.data(), out.mask = mask.data();
    out.reward = reward.data(), out.terminated = terminated.data();
    out.truncated = truncated.data(), out.final_obs = final_obs.data();
    out.final_plan = final_plan.data(), out.errors = &errors;
    {
      nb::gil_scoped_release release;
      envs_.step_into(actions.data(), out);
    }
    nb::dict d;
    d["obs"] = obs.release({n_, dim_});
    d["reward"] = reward.release({n_});
    d["terminated"] = terminated.release<bool>({n_});
    d["truncated"] = truncated.release<bool>({n_});
    d["final_obs"] = final_obs.release({n_, dim_});
    d["final_plan"] = final_plan.release({n_, blocks_});
    d["plan"] = plan.release({n_, blocks_});
    d["action_mask"] = mask.release<bool>({n_, mask_});
    d["error"] = errors;
    return d;
  }

  nb::object masks() const {
    std::vector<std::vector<uint8_t>> m;
    {
      nb::gil_scoped_release release;
      m = envs_.action_masks();
    }
    Owned<uint8_t> flat(n_ * mask_);
    for (size_t i = 0; i < m.size(); ++i) {
      for (size_t j = 0; j < mask_ && j < m[i].size(); ++j)
        flat.data()[i * mask_ + j] = m[i][j] != 0;
    }
    return flat.release<bool>({n_, mask_});
  }

 private:
  VectorEnv envs_;
  size_t n_ = 0, dim_ = 0, blocks_ = 0, actions_ = 0, mask_ = 0;
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
