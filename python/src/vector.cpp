// _shardgym.VectorEnv: env/vector_env.h's VectorEnv (N envs stepped on C++ threads, autoreset)
// with every per-env result written by the env's thread straight into the buffer of the
// numpy array returned (VectorEnv::step_into), so a Python step costs one call whatever N is
// and each result is copied once. reset and step return shardgym.vector's results as they
// are (the observation Dict's parts as views of one buffer, the info dict), so the Python
// class adds no work per step. Infos follow Gymnasium's vector conventions for its same-step
// autoreset: every key k with a bool "_k" of the envs that have it, and "final_obs" /
// "final_info" for the envs that ended. A masked entry of an action is refused here, before
// the C++ step (which would throw): the entry in force stays and info["refused"] flags it,
// as the single env does (python/shardgym/env.py).
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "convert.h"

#include "env/registry.h"
#include "env/vector_env.h"
#include "runtime/core/training_run.h"

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
  // The envs are siblings of one spec: they share what their backend shares (the simulator:
  // its costs, priced once for all N; env/registry.h make_sibling_envs).
  PyVectorEnv(const std::string& id, const ExperimentSpec& spec, int num_envs, int threads)
      : envs_(
            num_envs, [maker = make_sibling_envs(id, spec)](int) { return maker(); }, threads) {
    const EnvSpec& s = envs_.spec();
    n_ = static_cast<size_t>(envs_.size());
    dim_ = static_cast<size_t>(envs_.observation_size());
    blocks_ = static_cast<size_t>(s.num_blocks);
    actions_ = static_cast<size_t>(envs_.action_size());
    mask_ = static_cast<size_t>(envs_.mask_size());
    catalog_size_ = s.catalog_size;
    parts_ = s.observation_parts;
    plan_.resize(n_ * blocks_);
    final_obs_.resize(n_ * dim_);
    final_plan_.resize(n_ * blocks_);
  }

  int size() const { return envs_.size(); }
  nb::dict spec() { return spec_to_dict(envs_.spec(), envs_.env(0).run()); }

  // The observation dict of `obs` (with the plan rows in plan_) and an info holding the mask,
  // kept as last_mask_: what reset and step return first.
  std::pair<nb::object, nb::dict> observed(Owned<float>& obs, Owned<uint8_t>& mask) {
    float* o = obs.data.get();
    nb::object obs_dict = observation(o, obs.release(), plan_.data());
    nb::dict info;
    uint8_t* m = mask.data.get();
    last_mask_ = array<const bool>(m, {n_, mask_}, mask.release());
    last_mask_data_ = m;
    info["action_mask_flat"] = last_mask_;
    info["_action_mask_flat"] = all_envs();
    return {obs_dict, info};
  }

  // (obs, {"action_mask_flat": (N, M) bool, read-only}); obs as in step.
  nb::tuple reset(uint64_t seed) {
    Owned<float> obs(n_ * dim_);
    Owned<uint8_t> mask(n_ * mask_);
    VectorBuffers out;
    out.obs = obs.data.get(), out.plan = plan_.data(), out.mask = mask.data.get();
    {
      nb::gil_scoped_release release;
      envs_.reset_into(seed, out);
    }
    auto [obs_dict, info] = observed(obs, mask);
    return nb::make_tuple(obs_dict, info);
  }

  // actions (N, A) int32 → (obs, reward (N) float64, terminated (N) bool, truncated (N) bool,
  // info). obs: {part: (N, *shape) float32 view for each observation part, "plan": (N, B)
  // int64 catalog indices, K where the strategy is outside the catalog}, after autoreset.
  // info: {"action_mask_flat": (N, M) bool after autoreset (read-only), "refused": (N, A)
  // bool, the entries refused as masked; "error": N strings (object array), "" where the step did not fail
  // ("_error": the envs whose step failed); when some env ended, "final_obs": their last obs
  // (the same Dict, rows of the other envs 0) and "final_info": {"error", "refused"} of their
  // last step, with "_final_obs" = "_final_info" = the envs that ended}.
  nb::tuple step(nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> actions) {
    if (actions.shape(0) != n_ || actions.shape(1) != actions_) {
      throw std::invalid_argument("VectorEnv.step: actions must have shape (" + std::to_string(n_) +
                                  ", " + std::to_string(actions_) + ")");
    }
    if (last_mask_data_ == nullptr) throw std::logic_error("VectorEnv.step before reset");
    Owned<uint8_t> refused(n_ * actions_);
    refuse_masked(actions.data(), refused.data.get());
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
      envs_.step_into(applied_.data(), out);
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
    auto [obs_dict, info] = observed(obs, mask);
    nb::object all = info["_action_mask_flat"];
    uint8_t* rf = refused.data.get();
    nb::object refused_array = array<bool>(rf, {n_, actions_}, refused.release());
    info["refused"] = refused_array;
    info["_refused"] = all;
    Owned<uint8_t> failed(n_);
    for (size_t i = 0; i < n_; ++i) failed.data[i] = !errors[i].empty();
    uint8_t* fl = failed.data.get();
    // An object array, as Gymnasium's vector wrappers (DictInfoToList) want every value.
    if (!object_array_.is_valid()) object_array_ = nb::module_::import_("numpy").attr("array");
    nb::object error_list = object_array_(nb::cast(errors), nb::arg("dtype") = "object");
    info["error"] = error_list;
    info["_error"] = array<bool>(fl, {n_}, failed.release());
    if (any_done) {
      uint8_t* dn = done.data.get();
      nb::object ended = array<bool>(dn, {n_}, done.release());
      nb::dict final_info;
      final_info["error"] = error_list;
      final_info["_error"] = ended;
      final_info["refused"] = refused_array;
      final_info["_refused"] = ended;
      // As Gymnasium's SyncVectorEnv builds a Dict final_obs: each part's "_part" as well
      // (DictInfoToList of gymnasium 1.1 needs them).
      nb::dict parts = nb::cast<nb::dict>(final_obs);
      std::vector<std::string> names;
      for (auto item : parts) names.push_back("_" + nb::cast<std::string>(item.first));
      for (const std::string& name : names) parts[name.c_str()] = ended;
      info["final_obs"] = final_obs;
      info["_final_obs"] = ended;
      info["final_info"] = final_info;
      info["_final_info"] = ended;
    }
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
  // applied_ = actions with every masked entry replaced by the entry in force (refused[j] =
  // 1 there), checked against the mask returned last, as PartitionEnv::check_action checks:
  // a block kept as it is and the plan-level choice 0 (keep) are always accepted.
  void refuse_masked(const int32_t* actions, uint8_t* refused) {
    applied_.assign(actions, actions + n_ * actions_);
    const size_t k = static_cast<size_t>(catalog_size_);
    for (size_t i = 0; i < n_; ++i) {
      const uint8_t* mask = last_mask_data_ + i * mask_;
      int32_t* a = applied_.data() + i * actions_;
      uint8_t* r = refused + i * actions_;
      for (size_t d = 0; d < actions_; ++d) {
        const bool block = d < blocks_;
        const int32_t keep = block ? plan_[i * blocks_ + d] : 0;
        const int32_t choices = static_cast<int32_t>(block ? k : mask_ - blocks_ * k);
        if (a[d] < 0 || a[d] >= choices) {  // outside the space: the C++ step names it
          r[d] = 0;
          continue;
        }
        const size_t at = (block ? d * k : blocks_ * k) + static_cast<size_t>(a[d]);
        r[d] = a[d] != keep && !mask[at];
        if (!r[d]) continue;
        if (keep < 0) {
          throw std::invalid_argument(
              "VectorEnv.step: env " + std::to_string(i) + ", block " + std::to_string(d) +
              ": choice " + std::to_string(a[d]) + " is masked and the block's strategy in " +
              "force is outside the catalog, so it cannot be kept");
        }
        a[d] = keep;
      }
    }
  }

  // A fresh all-True (N,) bool array: the "_k" of info keys every env has.
  nb::object all_envs() const {
    Owned<uint8_t> all(n_);
    std::fill_n(all.data.get(), n_, uint8_t{1});
    uint8_t* p = all.data.get();
    return array<bool>(p, {n_}, all.release());
  }

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
  // The mask returned last (read-only numpy array kept alive here), for refuse_masked.
  nb::object last_mask_;
  const uint8_t* last_mask_data_ = nullptr;
  std::vector<int32_t> applied_;  // the actions as stepped (N × A)
  nb::object object_array_;       // numpy.array, looked up once
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
