#include "datasets/trace_writer.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "datasets/h5_util.h"

namespace shardgym {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Scalar keys become dataset names: '/' would open a subgroup, "" and "." are not names.
std::string dataset_name_for(const std::string& key) {
  std::string out = key.empty() || key == "." ? "_" : key;
  for (char& c : out) {
    if (c == '/') c = '_';
  }
  return out;
}

std::string join(const std::set<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ",") + v;
  return out;
}

// A per-block / per-rank vector as a row: empty (not measured) becomes NaN, any other size
// than `width` is a bug of the env that produced it.
std::vector<double> row_of(const std::vector<double>& v, int width, const char* what) {
  if (v.empty()) return std::vector<double>(width, kNaN);
  if (static_cast<int>(v.size()) != width) {
    throw std::invalid_argument(std::string("TraceWriter: ") + what + " has " +
                                std::to_string(v.size()) + " entries, the episode has " +
                                std::to_string(width));
  }
  return v;
}

}  // namespace

struct TraceWriter::State {
  struct Episode {
    h5::H5Id group, metrics, scalars_group;
    int index = 0, obs_dim = 0, action_dim = 0, blocks = 0, world = 0, steps = 0;
    h5::Column observations, actions, rewards, terminations, truncations, plans;
    h5::Column latency, repartition, repartition_bytes, repartition_peak, energy, tokens, loss;
    h5::Column ok, oom;
    h5::Column peak_memory, fwd, bwd, comm;
    std::map<std::string, h5::Column> scalars;
    std::set<std::string> latency_sources, memory_sources, energy_sources;
    std::string error;
    int error_step = -1;
  };

  explicit State(std::string p) : path(std::move(p)), err(path) {}

  std::string path;
  h5::H5Error err;
  TraceMetadata meta;
  TraceWriterOptions options;
  h5::H5Id file, episodes, string_type;
  h5::Column strategies_column;
  std::vector<std::string> strategies;
  std::map<std::string, int> strategy_ids;
  std::vector<std::pair<Strategy, int>> strategy_cache;
  int next_index = 0, completed = 0;
  std::string agent;
  std::unique_ptr<Episode> ep;
  hsize_t expected_rows = 0;  // of the open episode's columns: max_episode_steps + 1 (0: unknown)

  void flush() { err.check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "flush"); }

  // Evictions off: dirty metadata stays in memory until the next flush (see the header).
  void set_evictions(bool enabled) {
    H5AC_cache_config_t config;
    config.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    err.check(H5Fget_mdc_config(file.get(), &config), "get metadata cache config");
    config.rpt_fcn_enabled = false;
    config.incr_mode = H5C_incr__off;  // HDF5 allows switching evictions only without resizing
    config.flash_incr_mode = H5C_flash_incr__off;
    config.decr_mode = H5C_decr__off;
    config.set_initial_size = false;
    config.evictions_enabled = enabled;
    err.check(H5Fset_mdc_config(file.get(), &config), "set metadata cache config");
  }

  // Plans repeat a handful of strategies: look them up by value before formatting text.
  int strategy_id(const Strategy& strategy) {
    for (const auto& [known, id] : strategy_cache) {
      if (known == strategy) return id;
    }
    const int id = strategy_id(strategy.to_string());
    strategy_cache.emplace_back(strategy, id);
    return id;
  }

  int strategy_id(const std::string& text) {
    auto it = strategy_ids.find(text);
    if (it != strategy_ids.end()) return it->second;
    if (text.size() >= h5::kStrategyStringBytes) {
      throw std::invalid_argument("TraceWriter: strategy '" + text + "' is longer than " +
                                  std::to_string(h5::kStrategyStringBytes - 1) + " characters");
    }
    int id = static_cast<int>(strategies.size());
    strategies.push_back(text);
    strategy_ids.emplace(text, id);
    return id;
  }

  // Writes table entries not yet in the file (only between episodes or at their end, so
  // that the table never changes while an episode is open).
  void write_new_strategies() {
    while (strategies_column.rows() < strategies.size()) {
      std::string padded = strategies[strategies_column.rows()];
      padded.resize(h5::kStrategyStringBytes, '\0');
      strategies_column.append(err, padded.data());
    }
  }

  h5::Column column(hid_t loc, const std::string& name, hid_t mem, hid_t file_type, int width,
                    const char* units = nullptr) {
    h5::Column c(err, loc, name, mem, file_type, width, options.deflate_level, expected_rows);
    if (units) h5::write_attr_string(err, c.id(), "units", units);
    return c;
  }
};

TraceWriter::TraceWriter(std::string path, TraceMetadata metadata, TraceWriterOptions options)
    : state_(std::make_unique<State>(std::move(path))) {
  h5::silence_hdf5();
  State& s = *state_;
  s.meta = std::move(metadata);
  s.options = options;
  s.agent = s.meta.agent;
  const h5::H5Error& err = s.err;
  // Format bounds 1.8: object headers carry checksums (damage is detected, not misread),
  // small groups keep their links in the header, and the superblock (v2) has no "open for
  // writing" flag that a killed writer would leave set (v3, the 1.10 format, has one, and such
  // a file then needs h5clear before anyone can open it). HDF5 1.8 can read these files.
  // v1 B-trees index the chunks; a small node rank keeps short episodes' indexes small.
  h5::H5Id fcpl(err.check_id(H5Pcreate(H5P_FILE_CREATE), "file creation properties"));
  err.check(H5Pset_istore_k(fcpl.get(), 8), "set chunk index rank");
  h5::H5Id fapl(err.check_id(H5Pcreate(H5P_FILE_ACCESS), "file access properties"));
  err.check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), "set format bounds");
  s.file = h5::H5Id(H5Fcreate(s.path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()));
  if (!s.file.valid()) err.fail_hdf5("cannot create the trace file");
  hid_t root = s.file.get();
  h5::write_attr_string(err, root, "format", kTraceFormat);
  h5::write_attr_int64(err, root, "version", kTraceVersion);
  h5::write_attr_string(err, root, "env_id", s.meta.env_id);
  h5::write_attr_string(err, root, "config", s.meta.config);
  if (!s.meta.config_path.empty()) {
    h5::write_attr_string(err, root, "config_path", s.meta.config_path);
  }
  h5::write_attr_string(err, root, "git_sha", s.meta.git_sha);
  h5::write_attr_string(err, root, "created", iso_time_now());
  h5::write_attr_string(err, root, "host", s.meta.host.empty() ? describe_host() : s.meta.host);
  s.string_type = h5::strategy_string_type(err);
  s.strategies_column = h5::Column(err, root, "strategies", s.string_type.get(),
                                   s.string_type.get(), 0, s.options.deflate_level);
  for (const auto& text : s.meta.strategies) s.strategy_id(text);
  s.write_new_strategies();
  s.episodes = h5::H5Id(err.check_id(
      H5Gcreate2(root, "episodes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create /episodes"));
  s.set_evictions(true);
  s.flush();
}

TraceWriter::~TraceWriter() {
  if (!state_ || !state_->file.valid()) return;
  state_->ep.reset();  // data of the open episode is written, its flag stays 0
  state_->episodes.reset();
  state_->strategies_column = h5::Column();
  state_->file.reset();
}

void TraceWriter::close() {
  if (!state_->file.valid()) return;
  state_->ep.reset();
  state_->episodes.reset();
  state_->strategies_column = h5::Column();
  // Close explicitly to report a failure (the destructor cannot).
  if (H5Fclose(state_->file.release()) < 0) state_->err.fail_hdf5("close");
}

const std::string& TraceWriter::path() const { return state_->path; }
bool TraceWriter::episode_open() const { return state_->ep != nullptr; }
int TraceWriter::episodes_completed() const { return state_->completed; }
void TraceWriter::set_agent(std::string agent) { state_->agent = std::move(agent); }

void TraceWriter::begin_episode(const EnvSpec& spec, uint64_t seed, const ResetResult& r) {
  State& s = *state_;
  if (!s.file.valid()) throw std::logic_error("TraceWriter: '" + s.path + "' is closed");
  h5::silence_hdf5();
  if (s.ep) end_episode();
  const h5::H5Error& err = s.err;
  auto ep = std::make_unique<State::Episode>();
  s.expected_rows = spec.max_episode_steps > 0 ? spec.max_episode_steps + 1 : 0;
  ep->index = s.next_index;
  ep->obs_dim = static_cast<int>(r.obs.size());
  ep->blocks = spec.num_blocks;
  if (spec.action_space.kind == SpaceKind::kMultiDiscrete) {
    ep->action_dim = static_cast<int>(spec.action_space.nvec.size());
  } else if (spec.action_space.kind == SpaceKind::kDiscrete) {
    ep->action_dim = 1;
  } else {
    ep->action_dim = spec.num_blocks;
  }
  ep->world = s.meta.world > 0 ? s.meta.world
                               : static_cast<int>(r.info.measurement.peak_memory_bytes.size());
  if (ep->obs_dim <= 0 || ep->blocks <= 0 || ep->action_dim <= 0 || ep->world <= 0) {
    throw std::invalid_argument(
        "TraceWriter: cannot size episode datasets (obs " + std::to_string(ep->obs_dim) +
        ", blocks " + std::to_string(ep->blocks) + ", action " + std::to_string(ep->action_dim) +
        ", world " + std::to_string(ep->world) +
        "); set TraceMetadata::world when reset reports no peak memory");
  }
  const std::string name = "episode_" + std::to_string(ep->index);
  ep->group = h5::H5Id(err.check_id(
      H5Gcreate2(s.episodes.get(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      "create episode group " + name));
  s.next_index++;  // taken even if what follows fails: the name exists now
  hid_t g = ep->group.get();
  h5::write_attr_int64(err, g, "complete", 0);
  h5::write_attr_uint64(err, g, "seed", seed);
  h5::write_attr_string(err, g, "agent", s.agent);
  h5::write_attr_string(err, g, "backend", spec.backend);
  h5::write_attr_string(err, g, "initial_plan",
                        r.info.plan.blocks.empty() ? "" : r.info.plan.to_string());

  // The reset measurement, as attributes of a small group.
  const Measurement& m0 = r.info.measurement;
  h5::H5Id reset(err.check_id(H5Gcreate2(g, "reset", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                              "create reset group"));
  hid_t rg = reset.get();
  h5::write_attr_double(err, rg, "step_latency_s", m0.step_latency_s);
  h5::write_attr_double(err, rg, "repartition_s", m0.repartition_s);
  h5::write_attr_double(err, rg, "repartition_bytes", m0.repartition_bytes);
  h5::write_attr_double(err, rg, "energy_j", m0.energy_j);
  h5::write_attr_double(err, rg, "tokens", m0.tokens);
  h5::write_attr_double(err, rg, "loss", m0.loss);
  h5::write_attr_doubles(err, rg, "block_fwd_s", m0.block_fwd_s);
  h5::write_attr_doubles(err, rg, "block_bwd_s", m0.block_bwd_s);
  h5::write_attr_doubles(err, rg, "block_comm_s", m0.block_comm_s);
  h5::write_attr_doubles(err, rg, "peak_memory_bytes", m0.peak_memory_bytes);
  h5::write_attr_int64(err, rg, "ok", m0.ok ? 1 : 0);
  h5::write_attr_int64(err, rg, "oom", m0.oom ? 1 : 0);
  h5::write_attr_string(err, rg, "error", m0.error);
  h5::write_attr_string(err, rg, "latency_source", m0.latency_source);
  h5::write_attr_string(err, rg, "memory_source", m0.memory_source);
  h5::write_attr_string(err, rg, "energy_source", m0.energy_source);

  const hid_t f32 = H5T_IEEE_F32LE, f64 = H5T_IEEE_F64LE, i32 = H5T_STD_I32LE, u8 = H5T_STD_U8LE;
  const hid_t nf = H5T_NATIVE_FLOAT, nd = H5T_NATIVE_DOUBLE, ni = H5T_NATIVE_INT32,
              nu = H5T_NATIVE_UINT8;
  ep->observations = s.column(g, "observations", nf, f32, ep->obs_dim);
  ep->actions = s.column(g, "actions", ni, i32, ep->action_dim);
  ep->rewards = s.column(g, "rewards", nd, f64, 0);
  ep->terminations = s.column(g, "terminations", nu, u8, 0);
  ep->truncations = s.column(g, "truncations", nu, u8, 0);
  ep->plans = s.column(g, "plans", ni, i32, ep->blocks);
  ep->metrics = h5::H5Id(err.check_id(
      H5Gcreate2(g, "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create metrics group"));
  hid_t mg = ep->metrics.get();
  ep->latency = s.column(mg, "step_latency_s", nd, f64, 0, "s");
  ep->repartition = s.column(mg, "repartition_s", nd, f64, 0, "s");
  ep->repartition_bytes = s.column(mg, "repartition_bytes", nd, f64, 0, "bytes");
  ep->repartition_peak = s.column(mg, "repartition_peak_bytes", nd, f64, 0, "bytes");
  ep->energy = s.column(mg, "energy_j", nd, f64, 0, "J");
  ep->tokens = s.column(mg, "tokens", nd, f64, 0, "tokens");
  ep->loss = s.column(mg, "loss", nd, f64, 0, "nats");
  ep->ok = s.column(mg, "ok", nu, u8, 0);
  ep->oom = s.column(mg, "oom", nu, u8, 0);
  ep->peak_memory = s.column(mg, "peak_memory_bytes", nd, f64, ep->world, "bytes");
  ep->fwd = s.column(mg, "block_fwd_s", nd, f64, ep->blocks, "s");
  ep->bwd = s.column(mg, "block_bwd_s", nd, f64, ep->blocks, "s");
  ep->comm = s.column(mg, "block_comm_s", nd, f64, ep->blocks, "s");
  ep->scalars_group = h5::H5Id(err.check_id(
      H5Gcreate2(g, "scalars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "create scalars group"));
  ep->observations.append(err, r.obs.data());

  s.ep = std::move(ep);
  s.flush();
  s.set_evictions(false);
}

void TraceWriter::record_step(const Action& action, const StepResult& r) {
  State& s = *state_;
  if (!s.ep) throw std::logic_error("TraceWriter: record_step without an open episode");
  h5::silence_hdf5();
  State::Episode& ep = *s.ep;
  const h5::H5Error& err = s.err;
  const Measurement& m = r.info.measurement;
  if (static_cast<int>(r.obs.size()) != ep.obs_dim) {
    throw std::invalid_argument("TraceWriter: observation has " + std::to_string(r.obs.size()) +
                                " features, the episode has " + std::to_string(ep.obs_dim));
  }
  if (static_cast<int>(action.size()) != ep.action_dim) {
    throw std::invalid_argument("TraceWriter: action has " + std::to_string(action.size()) +
                                " entries, the episode's action space has " +
                                std::to_string(ep.action_dim));
  }
  const auto peak = row_of(m.peak_memory_bytes, ep.world, "peak_memory_bytes");
  const auto fwd = row_of(m.block_fwd_s, ep.blocks, "block_fwd_s");
  const auto bwd = row_of(m.block_bwd_s, ep.blocks, "block_bwd_s");
  const auto comm = row_of(m.block_comm_s, ep.blocks, "block_comm_s");
  std::vector<int32_t> plan_ids(ep.blocks, -1);
  if (!r.info.plan.blocks.empty()) {
    if (r.info.plan.size() != ep.blocks) {
      throw std::invalid_argument("TraceWriter: plan has " + std::to_string(r.info.plan.size()) +
                                  " blocks, the episode has " + std::to_string(ep.blocks));
    }
    for (int b = 0; b < ep.blocks; ++b) plan_ids[b] = s.strategy_id(r.info.plan.blocks[b]);
  }

  ep.observations.append(err, r.obs.data());
  ep.actions.append(err, action.data());
  ep.rewards.append(err, &r.reward);
  const uint8_t term = r.terminated ? 1 : 0, trunc = r.truncated ? 1 : 0;
  ep.terminations.append(err, &term);
  ep.truncations.append(err, &trunc);
  ep.plans.append(err, plan_ids.data());
  ep.latency.append(err, &m.step_latency_s);
  ep.repartition.append(err, &m.repartition_s);
  ep.repartition_bytes.append(err, &m.repartition_bytes);
  ep.repartition_peak.append(err, &m.repartition_peak_bytes);
  ep.energy.append(err, &m.energy_j);
  ep.tokens.append(err, &m.tokens);
  ep.loss.append(err, &m.loss);
  const uint8_t ok = m.ok ? 1 : 0, oom = m.oom ? 1 : 0;
  ep.ok.append(err, &ok);
  ep.oom.append(err, &oom);
  ep.peak_memory.append(err, peak.data());
  ep.fwd.append(err, fwd.data());
  ep.bwd.append(err, bwd.data());
  ep.comm.append(err, comm.data());

  std::map<std::string, double> scalar_row;
  for (const auto& [key, value] : r.info.scalars) scalar_row[dataset_name_for(key)] = value;
  for (const auto& [name, value] : scalar_row) {
    if (ep.scalars.count(name)) continue;
    // First appearance: earlier steps did not report it.
    h5::Column c = s.column(ep.scalars_group.get(), name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, 0);
    for (int t = 0; t < ep.steps; ++t) c.append(err, &kNaN);
    ep.scalars.emplace(name, std::move(c));
  }
  for (auto& [name, column] : ep.scalars) {
    auto it = scalar_row.find(name);
    const double v = it == scalar_row.end() ? kNaN : it->second;
    column.append(err, &v);
  }

  if (ep.error_step < 0 && (!m.ok || !r.info.error.empty())) {
    ep.error_step = ep.steps;
    ep.error = !r.info.error.empty() ? r.info.error : m.error;
  }
  ep.latency_sources.insert(m.latency_source);
  ep.memory_sources.insert(m.memory_source);
  ep.energy_sources.insert(m.energy_source);
  ep.steps++;
}

void TraceWriter::end_episode() {
  State& s = *state_;
  if (!s.ep || !s.file.valid()) return;
  h5::silence_hdf5();
  const h5::H5Error& err = s.err;
  State::Episode& ep = *s.ep;
  s.write_new_strategies();
  hid_t g = ep.group.get();
  h5::write_attr_int64(err, g, "steps", ep.steps);
  h5::write_attr_string(err, g, "error", ep.error);
  h5::write_attr_int64(err, g, "error_step", ep.error_step);
  const std::string lat = join(ep.latency_sources), mem = join(ep.memory_sources),
                    energy = join(ep.energy_sources);
  for (h5::Column* c : {&ep.latency, &ep.repartition, &ep.fwd, &ep.bwd, &ep.comm}) {
    h5::write_attr_string(err, c->id(), "source", lat);
  }
  for (h5::Column* c : {&ep.peak_memory, &ep.repartition_peak})
    h5::write_attr_string(err, c->id(), "source", mem);
  h5::write_attr_string(err, ep.energy.id(), "source", energy);
  // Data first, then the flag: the flag can only reach the disk after the data has.
  h5::H5Id group = std::move(ep.group);
  s.ep.reset();  // closes the datasets (their chunk caches write out)
  s.flush();
  h5::overwrite_attr_int64(err, group.get(), "complete", 1);
  group.reset();
  s.flush();
  s.completed++;
  s.set_evictions(true);
}

}  // namespace shardgym
