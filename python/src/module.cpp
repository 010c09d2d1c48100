// _shardgym: the C++ env, registry, agents and vector env for the `shardgym` Python package
// (python/shardgym). Thin by design: Gymnasium spaces, option checks and the Dict observation
// are built in Python from what this module reports (EnvSpec, observation parts, catalog).
#include <memory>
#include <stdexcept>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include "convert.h"

#include "agents/agent.h"
#include "agents/evaluate.h"
#include "env/registry.h"
#include "experiments/config.h"
#include "runtime/core/training_run.h"

namespace shardgym::py {

void bind_vector(nb::module_& m);  // vector.cpp

namespace {

// One env built by make_env (TimeLimit ∘ NormalizeReward, as the CLI runs it).
class PyEnv {
 public:
  PyEnv(const std::string& id, const ExperimentSpec& spec) : env_(make_env(id, spec)) {}

  nb::dict spec() const { return spec_to_dict(env_->spec(), env_->run()); }

  nb::tuple reset(std::optional<uint64_t> seed) {
    ResetResult r;
    {
      nb::gil_scoped_release release;
      r = env_->reset(seed);
    }
    const size_t d = r.obs.size();
    return nb::make_tuple(to_numpy(std::move(r.obs), {d}), info_to_dict(r.info));
  }

  nb::tuple step(const std::vector<int32_t>& action) {
    StepResult r;
    {
      nb::gil_scoped_release release;
      r = env_->step(action);
    }
    const size_t d = r.obs.size();
    return nb::make_tuple(to_numpy(std::move(r.obs), {d}), r.reward, r.terminated, r.truncated,
                          info_to_dict(r.info));
  }

  nb::object action_mask() const {
    std::vector<uint8_t> m = env_->action_mask();
    return nb::cast(to_numpy_bool(m, {m.size()}));
  }

  int elapsed_steps() const { return env_->elapsed_steps(); }

 private:
  std::unique_ptr<Env> env_;
};

// One greedy episode of a registered agent on the experiment's env (agents/evaluate.h).
nb::dict run_agent(const std::string& agent_id, const ExperimentSpec& spec, uint64_t seed) {
  EpisodeSummary s;
  {
    nb::gil_scoped_release release;
    auto env = make_env(spec.env_id, spec);
    auto agent = make_agent(agent_id, env->spec(), seed);
    s = run_episode(*env, *agent, seed, /*learn=*/false);
  }
  nb::dict d;
  d["agent"] = s.agent;
  d["seed"] = s.seed;
  d["steps"] = s.steps;
  d["return"] = s.total_reward;
  d["throughput"] = s.throughput;
  d["peak_memory_bytes"] = s.peak_memory_bytes;
  d["energy_j"] = s.energy_j;
  d["failed_steps"] = s.failed_steps;
  d["final_plan"] = s.final_plan;
  d["wall_s"] = s.wall_s;
  return d;
}

// One option of a registration as Python sees it (python/shardgym/env.py checks kwargs with it).
nb::dict option_to_dict(const EnvOption& o) {
  nb::dict d;
  d["name"] = o.name;
  d["type"] = option_type_name(o.type);
  d["default"] = o.default_value();
  d["doc"] = o.doc;
  d["config_key"] = o.config_key;
  if (o.type == OptionType::kInt || o.type == OptionType::kDouble) {
    d["min"] = o.min;
    d["max"] = o.max;
  }
  return d;
}

nb::list options_to_list(const std::vector<EnvOption>& options) {
  nb::list l;
  for (const EnvOption& o : options) l.append(option_to_dict(o));
  return l;
}

// The registration of `id`: description, flags, options (common ones first).
nb::dict env_info(const std::string& id) {
  const EnvType& t = env_type(id);
  nb::dict d;
  d["id"] = t.id;
  d["description"] = t.description;
  nb::dict flags;
  for (const auto& [name, value] : flag_list(t.flags)) flags[name.c_str()] = value;
  d["flags"] = flags;
  d["options"] = options_to_list(env_options(id));
  return d;
}

}  // namespace
}  // namespace shardgym::py

NB_MODULE(_shardgym, m) {
  using namespace shardgym;
  using namespace shardgym::py;
  m.doc() = "ShardGym's C++ envs, agents and vector env (use the `shardgym` package)";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const ConfigError& e) {  // a bad config is bad input, as in the CLI (exit 2)
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  nb::class_<ExperimentSpec>(m, "Experiment", "An experiment config as loaded (ExperimentSpec)")
      .def_ro("name", &ExperimentSpec::name)
      .def_rw("env_id", &ExperimentSpec::env_id)
      .def_rw("steps_per_episode", &ExperimentSpec::steps_per_episode)
      .def_rw("initial_plan", &ExperimentSpec::initial_plan)
      .def_rw("replay_trace", &ExperimentSpec::replay_trace)
      .def_ro("source_path", &ExperimentSpec::source_path)
      .def_ro("seeds", &ExperimentSpec::seeds)
      .def_prop_rw(
          "normalize_reward", [](const ExperimentSpec& s) { return s.reward.normalize; },
          [](ExperimentSpec& s, bool v) { s.reward.normalize = v; })
      .def_prop_ro("instance", [](const ExperimentSpec& s) { return s.scenario.instance; })
      .def_prop_ro("agent", [](const ExperimentSpec& s) { return s.agent.id; });

  m.def("load_experiment", &load_experiment, nb::arg("path"),
        "Reads and checks an experiment YAML file (ValueError naming file, line and key)");
  m.def("env_ids", &registered_env_ids, "Registered env ids, sorted");
  m.def("env_description", &env_description, nb::arg("id"));
  m.def("env_info", &env_info, nb::arg("id"),
        "The registration of an env: id, description, flags (dict of bool) and options (list "
        "of dicts: name, type, default, doc, config_key, min/max for numbers)");
  m.def(
      "common_options", [] { return options_to_list(common_env_options()); },
      "The options every env takes (read by make_env)");
  m.def("set_option", &set_env_option, nb::arg("experiment"), nb::arg("name"), nb::arg("value"),
        "Sets an option of the experiment's env (ValueError naming the config key if the value "
        "has the wrong type or range, or if the env has no such option)");
  m.def("validate_experiment", &validate_env_spec, nb::arg("experiment"),
        "The env registration's check of the whole experiment (ValueError naming the key)");
  m.def("agent_names", &registered_agent_names, "Registered agent names");
  m.def("run_agent", &run_agent, nb::arg("agent"), nb::arg("experiment"), nb::arg("seed") = 0,
        "One evaluation episode of a registered agent on the experiment's env: a dict with "
        "'return', 'throughput', 'steps', 'final_plan', ...");

  nb::class_<PyEnv>(m, "Env", "One env as make_env builds it (TimeLimit, NormalizeReward)")
      .def(nb::init<const std::string&, const ExperimentSpec&>(), nb::arg("id"),
           nb::arg("experiment"))
      .def("spec", &PyEnv::spec)
      .def("reset", &PyEnv::reset, nb::arg("seed") = nb::none())
      .def("step", &PyEnv::step, nb::arg("action"))
      .def("action_mask", &PyEnv::action_mask)
      .def("elapsed_steps", &PyEnv::elapsed_steps);

  bind_vector(m);
}
