// _shardgym.VectorEnv: env/vector_env.h's VectorEnv (N envs stepped on C++ threads, autoreset)
// with every per-env result written by the env's thread straight into the buffer of the
// numpy array returned (VectorEnv::step_into), so a Python step costs one call whatever N is
// and each result is copied once. reset and step return shardgym.vector's results as they
// are (the observation Dict's parts as views of one buffer, the info dict), so the Python
// class adds no work per step.
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"

#include "env/registry.h"
#include "env/vector_env.h"
#include "runtime/core/training_run.h"
#include "runtime/sim/sim_run.h"

namespace shardgym::py {
namespace {

// An uninitialised buffer that numpy arrays will own (no copy when it is handed over); for
// results that every env's row overwrites.
template <typename T>
struct Owned {
  explicit Owned(size_t n) : data(new T[n]) {}
  // The capsule that frees the buffer with the last array viewing it; the buffer is the
  // arrays' from now on.
  nb::capsule release() {
    return nb::capsule(data.release(), [](void* p) noexcept { delete[] static_cast<T*>(p); });
  }
  std::unique_ptr<T[]> data;
};

// numpy array over `data` (owned by `owner`); `As` reinterprets the elements (uint8 0/1 as
// numpy bool).
template <typename As, typename T>
nb::object array(T* data, std::initializer_list<size_t> shape, const nb::capsule& owner,
                 std::initializer_list<int64_t> strides = {}) {
  return nb::cast(
      nb::ndarray<nb::numpy, As>(reinterpret_cast<As*>(data), shape, owner, strides));
}

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
    catalog_size_ = s.catalog_size;
    // Every env comes from the same id and spec: simulated runs share their transfer costs,
    // so a pair of layouts that all N envs meet is priced once (SimRun::share_costs_with).
    if (auto* first = dynamic_cast<SimRun*>(&envs_.env(0).run())) {
      for (int i = 1; i < envs_.size(); ++i)
        if (auto* run = dynamic_cast<SimRun*>(&envs_.env(i).run())) run->share_costs_with(*first);
    }
    parts_ = s.observation_parts;
    plan_.resize(n_ * blocks_);
    final_obs_.resize(n_ * dim_);
    final_plan_.resize(n_ * blocks_);
  }

  int size() const { return envs_.size(); }
  nb::dict spec() { return spec_to_dict(envs_.spec(), envs_.env(0).run()); }

  // (obs, {"action_mask": (N, M) bool}); obs as in step.
  nb::tuple reset(uint64_t seed) {
    Owned<float> obs(n_ * dim_);
    Owned<uint8_t> mask(n_ * mask_);
    VectorBuffers out;
    out.obs = obs.data.get(), out.plan = plan_.data(), out.mask = mask.data.get();
    {
      nb::gil_scoped_release release;
      envs_.reset_into(seed, out);
    }
    float* o = obs.data.get();
    nb::object obs_dict = observation(o, obs.release(), plan_.data());
    nb::dict info;
    uint8_t* m = mask.data.get();
    info["action_mask"] = array<bool>(m, {n_, mask_}, mask.release());
    return nb::make_tuple(obs_dict, info);
  }

  // actions (N, A) int32 → (obs, reward (N) float64, terminated (N) bool, truncated (N) bool,
  // info). obs: {part: (N, *shape) float32 view for each observation part, "plan": (N, B)
  // int64 catalog indices, K where the strategy is outside the catalog}, after autoreset.
  // info: {"action_mask": (N, M) bool after autoreset, "_final": (N) bool, the envs that
  // ended; "final_obs": their last obs, the same Dict with rows of the other envs 0, or None
  // when none ended; "error": N strings, "" where the step did not fail}.
  nb::tuple step(nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> actions) {
    if (actions.shape(0) != n_ || actions.shape(1) != actions_) {
      throw std::invalid_argument("VectorEnv.step: actions must have shape (" + std::to_string(n_) +
                                  ", " + std::to_string(actions_) + ")");
    }
    Owned<float> obs(n_ * dim_);
    Owned<uint8_t> mask(n_ * mask_), terminated(n_), truncated(n_), done(n_);
    Owned<double> reward(n_);
    std::vector<std::string> errors;
    VectorBuffers out;
    out.obs = obs.data.get(), out.plan = plan_.data(), out.mask = mask.data.get();
    out.reward = reward.data.get(), out.terminated = terminated.data.get();
    out.truncated = truncated.data.get(), out.final_obs = final_obs_.data();
    out.final_plan = final_plan_.data(), out.errors = &errors;
    {
      nb::gil_scoped_release release;
      envs_.step_into(actions.data(), out);
    }
    bool any_done = false;
    for (size_t i = 0; i < n_; ++i) {
      done.data[i] = terminated.data[i] | truncated.data[i];
      any_done = any_done || done.data[i];
    }
    nb::object final_obs = nb::none();
    if (any_done) {
      // Rows of envs that ended; the others 0 (final_obs_ / final_plan_ keep older rows).
      Owned<float> fo(n_ * dim_);
      std::vector<int32_t> fp(n_ * blocks_, 0);
      std::fill_n(fo.data.get(), n_ * dim_, 0.0f);
      for (size_t i = 0; i < n_; ++i) {
        if (!done.data[i]) continue;
        std::copy_n(&final_obs_[i * dim_], dim_, fo.data.get() + i * dim_);
        std::copy_n(&final_plan_[i * blocks_], blocks_, fp.data() + i * blocks_);
      }
      float* f = fo.data.get();
      final_obs = observation(f, fo.release(), fp.data());
    }
    float* o = obs.data.get();
    nb::object obs_dict = observation(o, obs.release(), plan_.data());
    nb::dict info;
    uint8_t* m = mask.data.get();
    info["action_mask"] = array<bool>(m, {n_, mask_}, mask.release());
    uint8_t* dn = done.data.get();
    info["_final"] = array<bool>(dn, {n_}, done.release());
    info["final_obs"] = final_obs;
    info["error"] = errors;
    double* r = reward.data.get();
    uint8_t *te = terminated.data.get(), *tr = truncated.data.get();
    return nb::make_tuple(obs_dict, array<double>(r, {n_}, reward.release()),
                          array<bool>(te, {n_}, terminated.release()),
                          array<bool>(tr, {n_}, truncated.release()), info);
  }

  nb::object masks() const {
    Owned<uint8_t> flat(n_ * mask_);
    {
      nb::gil_scoped_release release;
      const std::vector<std::vector<uint8_t>> m = envs_.action_masks();
      std::fill_n(flat.data.get(), n_ * mask_, 0);
      for (size_t i = 0; i < m.size(); ++i) {
        for (size_t j = 0; j < mask_ && j < m[i].size(); ++j)
          flat.data[i * mask_ + j] = m[i][j] != 0;
      }
    }
    uint8_t* f = flat.data.get();
    return array<bool>(f, {n_, mask_}, flat.release());
  }

 private:
  // The observation Dict over the flat (N, D) buffer `flat` (owned by `owner`): one strided
  // view per observation part, then "plan" as int64 with K for -1.
  nb::object observation(float* flat, const nb::capsule& owner, const int32_t* plan) const {
    nb::dict d;
    const int64_t row = static_cast<int64_t>(dim_);
    for (const ObservationPart& p : parts_) {
      // Shape (N, *p.shape), row-major inside a row, rows D apart.
      size_t shape[4] = {n_, 1, 1, 1};
      int64_t strides[4] = {row, 1, 1, 1};
      const size_t nd = 1 + p.shape.size();
      if (nd > 4) throw std::logic_error("VectorEnv: observation part '" + p.name + "' has " +
                                         std::to_string(p.shape.size()) + " axes (at most 3)");
      for (size_t a = 0; a < p.shape.size(); ++a) shape[1 + a] = static_cast<size_t>(p.shape[a]);
      for (size_t a = nd - 1; a >= 2; --a) strides[a - 1] = strides[a] * int64_t(shape[a]);
      d[p.name.c_str()] = nb::cast(nb::ndarray<nb::numpy, float>(flat + p.offset, nd, shape, owner,
                                                                 strides));
    }
    Owned<int64_t> out(n_ * blocks_);
    for (size_t j = 0; j < n_ * blocks_; ++j) out.data[j] = plan[j] < 0 ? catalog_size_ : plan[j];
    int64_t* o = out.data.get();
    d["plan"] = array<int64_t>(o, {n_, blocks_}, out.release());
    return d;
  }

  VectorEnv envs_;
  size_t n_ = 0, dim_ = 0, blocks_ = 0, actions_ = 0, mask_ = 0;
  int64_t catalog_size_ = 0;
  std::vector<ObservationPart> parts_;
  // Buffers the C++ step writes and the arrays returned are built from.
  std::vector<int32_t> plan_, final_plan_;
  std::vector<float> final_obs_;
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
