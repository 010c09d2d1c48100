// PPO (Schulman et al. 2017) for per-block partitioning, in LibTorch. CleanRL's ppo.py
// defaults are the starting point. This header is torch-free; the network lives in
// agents/ppo_net.h (private) and LibTorch is linked only to shardgym::agents_rl.
//
// Policy. A per-block encoder shared by all blocks (MLP over the block's 10 features, its
// kind, its position and the global features — observation layout in env/partition_env.h)
// feeds one categorical head per block over the catalog; masked entries get logit −inf, so a
// masked action is never sampled. Log-probability and entropy of a plan are sums over blocks
// (CleanRL's MultiDiscrete). The value head reads the mean block embedding and the globals.
// With a pipeline component (env/pipeline_action.h) one more categorical over the boundary
// moves reads the same pooled input, with its own keep bonus on "keep the boundaries".
// With plan=1 (off by default) three more rows: a plan move (yes / no, drawn with the fixed
// probability plan_p) and the entry every attention block and every MLP block then takes
// (read from the run's conditions), so a whole plan moves in one sampled step
// (PPOConfig::plan). On a plan move the block rows are not used (no gradient from that step);
// without one the entry rows are not. Evaluation moves every block of a kind to its entry
// row's preferred entry when it beats the kind's entries in force by more than `margin` nats
// (both decodes).
// Because measured times, link bandwidths and the scenario phase are inputs, the policy
// reacts to a change of conditions within an episode.
//
// Learning. GAE(γ, λ); clipped surrogate; clipped value loss; entropy bonus; advantages
// normalised per minibatch; Adam (eps 1e-5); global gradient-norm clipping. Two departures
// from CleanRL, both switchable: ratio=block clips the probability ratio of every block
// separately (Σ_b min(r_b·A, clip(r_b)·A)) — with one joint ratio over B blocks, the clip
// lets each block move only ~clip/B per update; keep=1 adds a learned per-kind logit bonus
// for the entry in force (see ppo_net.h). A truncated
// episode bootstraps from the value of its final observation; a failed step (the env's
// error, or a plan out of memory) ends the episode with reward `fail_reward` (train() resets
// that env at once).
//
//   ppo(lr=3e-4,rollout=128,epochs=4,minibatches=4,gamma=0.99,lambda=0.95,clip=0.2,
//       ent=0.01,vf=0.5,max_grad_norm=0.5,hidden=64,fail_reward=-1,ratio=block,keep=1,
//       keep_p=0.95,decode=pref,margin=1,plan=0|1|alt,plan_p=0.05,plan_lr=0.01,restart_s=0,
//       polish=0,polish_gain=0.001)
//
// Polish (polish=N > 0): the factory (make_ppo_agent) returns PPO inside Polished
// (agents/polished.h), the plan search as an agent of its own: every N updates it searches
// whole-kind substitutions of the greedy policy's plans (agents/plan_polish.h) and applies
// the tables it keeps in evaluation. PPO itself knows nothing of it: it samples and learns
// as it would without, and lends the search seeds of its generator (draw_seed) and env 0
// (drop_episode).
//
// Restart on stall (restart_s > 0, vectorised training only): the Trainer (agents/trainer.h)
// watches its greedy evaluations of the current run and, when they have not improved for
// restart_s seconds of training, asks PPO to start afresh (start_afresh): the network,
// optimizer, generator and rollout state (the envs are reset) start from a seed derived from
// the agent's seed and the run's number (restart_seed); update and step counts go on. The
// Trainer keeps the best evaluated policy across all runs. A checkpoint needs nothing of it.
//
// Two ways to train: the Agent API (act / observe / update: an update runs every `rollout`
// observed steps) or train() on a VectorEnv (`rollout` steps of every env per update).
// Determinism: the agent draws from its own generator, seeded with its seed; parameters are
// initialised after torch::manual_seed(seed). With at::set_num_threads(1) the same seed gives
// the same learning curve bit for bit on the simulator.
//
// Length: the id's parameters are PPO's user interface, and each is documented here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agents/agent.h"
#include "agents/learner.h"

namespace shardgym {

class VectorEnv;
namespace checkpoint {
struct RecordFile;
}
namespace ppo_detail {
struct CheckpointLayout;
}

struct PPOConfig {
  double lr = 3e-4;
  int rollout = 128;  // steps per env between updates
  int epochs = 4;
  int minibatches = 4;
  double gamma = 0.99;
  double lambda = 0.95;
  double clip = 0.2;
  double ent_coef = 0.01;
  double vf_coef = 0.5;
  double max_grad_norm = 0.5;
  bool norm_adv = true;
  bool clip_vloss = true;
  // norm_reward=1: each env reward is divided by the running standard deviation of the
  // discounted return before learning (agents/return_scale.h: Gymnasium's NormalizeReward, not
  // clipped); fail_reward is added unscaled. Off by default; what it did on the adaptivity
  // suite: docs/suite.md.
  bool norm_reward = false;
  int hidden = 64;
  double fail_reward = -1.0;
  bool block_ratio = true;  // ratio=block (per-block clipping) | ratio=joint (CleanRL)
  bool keep = true;         // learned logit bonus for each block's entry in force
  // Initial probability that a block keeps its entry (sets the keep bonus's start:
  // log(p/(1−p)·(K−1)) against K−1 equal alternatives). Adam moves a single scalar only
  // ~lr per step, so the start matters: a near-uniform start repartitions every block at
  // every step and drowns the reward of any plan in repartition cost.
  double keep_p = 0.95;
  // Evaluation (set_training(false)): decode=mode takes each block's most likely entry, the
  // keep bonus included; decode=pref takes the block's preferred entry by the logits without
  // the bonus, but only when it beats the entry in force by more than `margin` nats (else the
  // block keeps it). The bonus makes a sampled policy change a block rarely and then stay,
  // so a block's mode stays on its entry in force long after the policy prefers another:
  // `pref` is the plan the sampled policy drifts to, without the wait.
  bool decode_pref = true;
  double margin = 1.0;
  // Plan rows (plan=1, off by default): besides each block's row, the policy has a plan-move
  // row and two entry rows; on a plan move every attention block takes one entry and every
  // MLP block another, in one step, so plans that move every block of a kind together are one
  // sampled step away instead of many lucky block moves. plan_p: the probability of a plan
  // move per training step, fixed (an exploration rate; learnt, it collapsed before the entry
  // rows knew where to go). plan_lr: Adam's step for the entry rows.
  bool plan = false;
  // plan=alt: the runs of restart on stall alternate, without plan rows (run 0, as plan=0)
  // and with them (runs 1, 3, ...): a population of the two kinds in time. plan stays false
  // in the config and each run's Impl gets its own flag (PPO::run_config). Needs restart_s > 0.
  bool plan_alt = false;
  double plan_p = 0.05;
  double plan_lr = 1e-2;
  // Restart on stall: seconds of training (wall, evaluations included) without an improving
  // evaluation after which the Trainer has PPO start afresh (agents/trainer.h, StallWatch);
  // 0 = never (the default).
  double restart_s = 0;
  // Polish: updates between two searches (0 = never, the default; the shipped configs use 4,
  // one value for all, not tuned) and the relative gain in episode return a substitution must
  // show on each of two seeds (0.1 %, StallWatch::kMinGain's reasoning: above the rounding of
  // a summed return, below the smallest gain that counts). It exists for plans one
  // coordinated move away: one block moving gains a fraction of a whole kind's move, under
  // the step noise, so per-block samples do not find it while a whole-kind substitution
  // scored on whole episodes does.
  //
  // What each of these options did, measured over training seeds and configs (plan rows,
  // restarts, the two kinds in turn, polish): docs/benchmarks.md, "PPO across training seeds".
  int polish = 0;
  double polish_gain = 1e-3;

  // From "ppo(k=v,...)"; throws std::invalid_argument on unknown keys or bad values.
  static PPOConfig from_id(const ParsedId& id);
};

// The seed of run `restart` (1, 2, ...) of an agent seeded `seed` (splitmix64 of both).
uint64_t restart_seed(uint64_t seed, int restart);

// One update's figures (CleanRL's logged scalars).
struct PPOUpdate {
  int update = 0;
  int64_t env_steps = 0;  // total so far
  double policy_loss = 0, value_loss = 0, entropy = 0, approx_kl = 0, clip_fraction = 0;
  double mean_episode_return = 0;  // of the episodes that ended during this rollout (NaN: none)
  int episodes = 0;
};

struct PPOTrainResult {
  int64_t env_steps = 0;
  std::vector<PPOUpdate> updates;
  std::vector<double> episode_returns;  // in order of completion, all envs
  double wall_s = 0;
};

class PPO : public Agent, public VectorLearner {
 public:
  PPO(const EnvSpec& spec, const PPOConfig& config, uint64_t seed, std::string name = "ppo");
  ~PPO() override;

  std::string name() const override { return name_; }
  Action act(const Observation& obs, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>& plan) override;
  void observe(const Transition& t) override;
  bool update() override;
  bool learns() const override { return true; }
  void set_training(bool training) override { training_ = training; }
  // Checkpoints (agents/checkpoint_file.h): a record file of plain arrays (no code), every
  // record checked against this agent's config before anything changes; earlier TorchScript
  // archives are refused. load_bytes is load on bytes already read (`where` names them).
  std::string save_bytes() const override;
  void load_bytes(const std::string& bytes, const std::string& where) override;
  size_t max_checkpoint_bytes() const override;

  // Trains on `envs` for at least `steps` env steps (summed over envs; whole rollouts).
  // The envs are reset at the start with seeds from the agent's generator. on_update is
  // called after every update (progress, logging); may be empty.
  // on_update returning false stops after that update.
  PPOTrainResult train(VectorEnv& envs, int64_t steps,
                       const std::function<bool(const PPOUpdate&)>& on_update = {});
  // VectorLearner: train() reporting TrainProgress; restarts on stall as the Trainer decides.
  VectorLearner* vector_learner() override { return this; }
  void train_vectorized(VectorEnv& envs, int64_t steps,
                        const std::function<bool(const TrainProgress&)>& on_progress) override;
  double restart_after_s() const override { return config_.restart_s; }
  void start_afresh(int run) override;
  uint64_t draw_seed() override;  // from the generator env seeds come from
  void drop_episode(int env) override;

  const PPOConfig& config() const { return config_; }
  int64_t parameter_count() const;
  int run() const { return run_; }  // 0, then the run of the last start_afresh

 private:
  struct Impl;
  std::string name_;
  PPOConfig config_;
  bool training_ = true;
  EnvSpec spec_;
  uint64_t seed_;
  std::unique_ptr<Impl> impl_;
  // The run in force (start_afresh), and a fresh run whose envs train()'s loop has yet to
  // reset.
  int run_ = 0;
  bool restart_pending_ = false;
  // Envs whose episodes train()'s loop is to drop (drop_episode), with their next seeds.
  std::vector<std::pair<int, uint64_t>> dropped_;
  // The config of run `run` (0: the first; restart k starts run k): config_ with plan rows
  // on odd runs under plan=alt.
  PPOConfig run_config(int run) const;
  void load_records(const checkpoint::RecordFile& f, const std::string& where);
  ppo_detail::CheckpointLayout checkpoint_layout(const Impl& m) const;
  ppo_detail::CheckpointLayout largest_checkpoint_layout() const;
};

std::unique_ptr<Agent> make_ppo_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed);

}  // namespace shardgym
