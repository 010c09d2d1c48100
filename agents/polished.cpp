#include "agents/polished.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "agents/checkpoint_file.h"
#include "env/vector_env.h"

namespace shardgym {
namespace {

using checkpoint::Elem;
using checkpoint::RecordFile;

constexpr const char* kKind = "polished";
constexpr int64_t kVersion = 1;

template <typename T>
void put_vec(RecordFile& f, const std::string& name, Elem t, const std::vector<T>& v) {
  f.put(name, t, {static_cast<int64_t>(v.size())}, v.data());
}

// The tables of a checkpoint ("sub", "sub_keys"), checked against `tables`' catalog and
// conditions: at most kPolishMaxKeys keys of finite conditions, 2K entries per table, each an
// entry of the catalog. Throws std::runtime_error naming `where`.
SubstitutionTables read_tables(const RecordFile& f, SubstitutionTables tables,
                               const std::string& where) {
  const int64_t K = tables.catalog;
  const size_t C = std::max<size_t>(1, tables.cond_index.size());
  std::vector<float> keys =
      f.vec<float>("sub_keys", Elem::kF32, static_cast<int64_t>(C) * kPolishMaxKeys, where);
  checkpoint::require_finite(f.records.at("sub_keys"), "sub_keys", where);
  std::vector<int32_t> sub = f.vec<int32_t>("sub", Elem::kI32, 2 * K * (1 + kPolishMaxKeys), where);
  const size_t n = 1 + keys.size() / C;
  if (keys.size() % C != 0 || sub.size() != 2 * static_cast<size_t>(K) * n ||
      std::any_of(sub.begin(), sub.end(), [&](int32_t e) { return e < 0 || e >= K; }))
    throw std::runtime_error(where + " has a damaged substitution table");
  tables.key_values = std::move(keys);
  tables.sub = std::move(sub);
  return tables;
}

}  // namespace

Polished::Polished(std::unique_ptr<Agent> inner, const EnvSpec& spec, int every, double gain)
    : inner_(std::move(inner)),
      learner_(inner_ ? inner_->vector_learner() : nullptr),
      tables_(spec),
      every_(every),
      gain_(gain),
      next_(every),
      wait_(every) {
  if (!learner_)
    throw std::invalid_argument("polished: the agent inside has no vectorised training");
  if (every < 1) throw std::invalid_argument("polished: searches every >= 1 updates");
  if (!(gain >= 0 && gain < 1)) throw std::invalid_argument("polished: gain must lie in [0, 1)");
}

Action Polished::act(const Observation& obs, const std::vector<uint8_t>& mask,
                     const std::vector<int32_t>& plan) {
  Action a = inner_->act(obs, mask, plan);
  if (!training_ && a.size() >= static_cast<size_t>(tables_.blocks))
    tables_.substitute(obs.data(), a.data(), mask);  // the block rows lead the action
  return a;
}

void Polished::set_training(bool training) {
  training_ = training;
  inner_->set_training(training);
}

void Polished::train_vectorized(VectorEnv& envs, int64_t steps,
                                const std::function<bool(const TrainProgress&)>& on_progress) {
  learner_->train_vectorized(envs, steps, [&](const TrainProgress& p) {
    if (p.update < next_) return on_progress ? on_progress(p) : true;
    // The search plays whole episodes on env 0; its open training episode is dropped.
    TrainProgress with_note = p;
    wait_ = search(envs.env(0), p.update, with_note.notes) > 0 ? every_ : 2 * wait_;
    next_ = p.update + wait_;
    set_training(true);
    learner_->drop_episode(0);
    return on_progress ? on_progress(with_note) : true;
  });
}

int Polished::search(Env& env, int update, std::vector<std::string>& notes) {
  // Training seeds: far from the small integers that configs evaluate on.
  const uint64_t seed_a = (uint64_t{1} << 40) + learner_->draw_seed();
  const uint64_t seed_b = (uint64_t{1} << 40) + learner_->draw_seed();
  // Greedy episodes of this agent (act applies the tables outside training) on `env`.
  auto play = [&](uint64_t seed, PolishLook* look) {
    return polish_episode(env, *this, tables_, seed, look);
  };
  const PolishResult r = polish_plans(tables_, play, seed_a, seed_b, gain_);
  notes.push_back(polish_note(update, r));
  return r.kept;
}

void Polished::start_afresh(int run) {
  learner_->start_afresh(run);
  // A fresh policy: no tables, and a search after its first update (as a fresh agent's count
  // of updates would reach `every` long before).
  tables_.clear();
  next_ = wait_ = every_;
}

std::string Polished::save_bytes() const {
  RecordFile f;
  f.kind = kKind;
  put_vec(f, "header", Elem::kI64, std::vector<int64_t>{kVersion});
  const std::string inner = inner_->save_bytes();
  f.put("inner", Elem::kU8, {static_cast<int64_t>(inner.size())}, inner.data());
  put_vec(f, "sub", Elem::kI32, tables_.sub);
  put_vec(f, "sub_keys", Elem::kF32, tables_.key_values);
  return f.encode();
}

void Polished::load_bytes(const std::string& bytes, const std::string& where) {
  // Own files hold 4 records; a PPO file that carries the tables itself, as many as its
  // bytes allow (every record takes more than 8 of them; the caller capped the bytes).
  const RecordFile f = RecordFile::decode(bytes, where, bytes.size() / 8 + 8);
  const bool own = f.kind == kKind;
  if (own) {
    const std::vector<int64_t> header = f.vec<int64_t>("header", Elem::kI64, 1, where);
    if (header.size() != 1 || header[0] != kVersion)
      throw std::runtime_error(where + ": not a version-" + std::to_string(kVersion) +
                               " polished checkpoint");
  }
  // Everything checked before anything changes: the tables, then the learner's own load
  // (which installs only what passed its checks), then the tables are installed.
  SubstitutionTables tables = tables_;
  if (own || f.has("sub")) {
    tables = read_tables(f, tables_, where);
  } else {
    tables.clear();
  }
  if (own) {
    const auto r = f.records.find("inner");
    if (r == f.records.end() || r->second.dtype != Elem::kU8 || r->second.shape.size() != 1)
      throw std::runtime_error(where + " has no byte string 'inner' (the learner's state)");
    inner_->load_bytes(r->second.data, where + " (the learner's state)");
  } else {
    inner_->load_bytes(bytes, where);
  }
  tables_ = std::move(tables);
}

size_t Polished::max_checkpoint_bytes() const {
  const size_t K = static_cast<size_t>(tables_.catalog);
  const size_t C = std::max<size_t>(1, tables_.cond_index.size());
  return inner_->max_checkpoint_bytes() + 2 * K * (1 + kPolishMaxKeys) * 4 +
         kPolishMaxKeys * C * 4 + 4096;
}

}  // namespace shardgym
