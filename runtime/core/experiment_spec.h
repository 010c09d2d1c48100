// ExperimentSpec: everything one experiment config (experiments/*.yaml) says, as plain data.
// Parsing and validation with file/key/line errors live in experiments/config.h; this header
// only holds the result so that env, agents and runs can take it without YAML.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/catalog.h"
#include "runtime/core/cluster_spec.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/plan.h"
#include "runtime/core/scenario.h"

namespace shardgym {

// Weights of the reward terms. With NormalizeReward each term is baseline/value, so 1.0
// means "as good as the static Megatron plan" on that term.
struct RewardSpec {
  double latency = 1.0;  // (iteration + repartition) time per token
  double memory = 0.0;   // peak memory of the fullest rank
  double energy = 0.0;   // energy per token
  bool normalize = true;
  // How the normalised latency term weighs the steps (reward.latency_as):
  //   speedup     Megatron-LM's time per token over the plan's, at each step: 1.0 = as fast.
  //               The return then weighs every step alike, whatever its tokens.
  //   time_saved  1 + (Megatron-LM's step time − the plan's) / Megatron-LM's step time at the
  //               episode's first step: the return is then the episode's time saved against
  //               Megatron-LM (plus N), so it orders policies as throughput does when the
  //               tokens per step change within an episode (hetero-dynamic's sequence
  //               lengths); with constant conditions the two order plans alike.
  bool latency_time_saved = false;
};

struct AgentSpec {
  std::string id = "random";  // registry string, e.g. "ppo(lr=3e-4)", "static"
  std::string plan;           // for "static": a plan text or "megatron" / "megatron-sp"
  std::string checkpoint;     // where `train` saves / `eval` loads
  int train_steps = 0;        // env steps of training (0 = agent's default)
};

// `live.extra`: typed options of the live env, declared with their meanings by its
// registration (backends/live_env.cpp; `shardgym envs` lists them). The defaults
// are those of RankTrainer (runtime/live/tp/rank_trainer.h): AdamW with GPT-3's weight decay
// 0.1 and gradient-norm clip 1.0 (Brown et al. 2020, appendix B); lr 1e-3 for the small
// CPU models of the live tests.
struct LiveExtra {
  double lr = 1e-3;
  double weight_decay = 0.1;
  double clip = 1.0;   // <= 0: no clipping
  std::string fault;   // failure tests: "<throw|stall|exit>@<rank>:<step>" | "nostart@<rank>"
  std::string worker;  // rank-worker executable; "" = $SHARDGYM_RANK_WORKER or the built one
};

// Settings of the live backend (runtime/live); ignored by the simulator.
struct LiveSpec {
  int ranks = 4;
  std::string launch = "threads";  // "threads" | "processes"
  std::string corpus;              // path of a text file; "" = the packaged default
  std::string precision = "float32";
  double timeout_s = 60;
  int threads_per_rank = 1;
  std::string device = "cpu";  // "cpu" | "cuda" (CUDA builds: scripts/build_cuda.sh)
  std::string backend;         // "gloo" | "nccl"; "" = gloo on cpu, nccl on cuda
  // Per env step, after the repartition: `warmup_iterations` unmeasured training iterations,
  // then `iterations` measured ones, whose medians the step reports (and their spread).
  int warmup_iterations = 0;
  int iterations = 1;
  LiveExtra extra;
};

// A measured run that the config reproduces (experiments/validation/): the figures as published
// and where they come from. `shardgym validate-sim` prints the simulator's error against them.
struct PublishedRun {
  std::string source;         // paper / repository, table, mark ([V] primary, [U] second-hand)
  double tflops_per_gpu = 0;  // model FLOP/s per GPU (published.md formula), 0 = not given
  double iteration_s = 0;     // seconds per iteration, 0 = not given
  double mfu = 0;             // fraction of peak, 0 = not given
  std::string note;
  // A table of measured runs instead (experiments/published_table.h): a CSV file in the
  // config's folder, one run per row; the config supplies what a row does not.
  std::string table;
};

struct ExperimentSpec {
  std::string name;
  std::string env_id = "shardgym/TPSim-v0";
  ModelSpec model;
  ClusterSpec cluster;
  Scenario scenario;
  RewardSpec reward;
  AgentSpec agent;
  CatalogOptions catalog;
  LiveSpec live;
  std::string initial_plan = "megatron";  // plan text, "megatron" or "megatron-sp"
  // `data_shares: {groups: n}`: the plan-level action also sets the data shares of n groups
  // per stage (env/share_action.h); 0 = no such choices.
  int data_share_groups = 0;
  int episodes = 3;
  int steps_per_episode = 100;
  std::vector<uint64_t> seeds = {0};
  std::string source_path;  // the YAML file it came from
  std::string source_text;  // its full text (stored in traces)
  // Line of each top-level key in source_path, for errors found after loading (e.g. an
  // initial plan that does not fit memory at reset).
  std::map<std::string, int> key_lines;
  std::string replay_trace;  // shardgym/TPReplay-v0: the trace file to play back
  PublishedRun published;    // validation configs only
};

// `spec` as instance `instance` of its scenario's draws (core/scenario_draw.h): the
// scenario's instance set and, when it has draws, the recorded text's top-level `instance:`
// line set to it (added as the first line if absent), so that a trace of the instance
// re-executes the same events.
ExperimentSpec with_instance(ExperimentSpec spec, uint64_t instance);
// `spec` with its scenario's draws turned into events (Scenario::drawn()): what a run of it
// is built from.
ExperimentSpec with_drawn_events(ExperimentSpec spec);

// Megatron-LM's usual static plan: tp1d with t = GPUs per node (reduced until it divides the
// heads, ffn and the world), the rest data parallel; `sp` adds sequence parallelism; m written
// by Megatron's rule (plan_micro_batches). With
// `stages` > 1: that many pipeline stages (even split, 1F1B), t as above
// within a stage's world / stages ranks. Which p Megatron's users pick needs the memory a run
// reports: resolve_baseline_plan (training_run.h).
Plan megatron_plan(const ModelSpec& model, const ClusterSpec& cluster, bool sp = false,
                   int stages = 1);
// Resolves "megatron", "megatron-sp" or a plan text; the result has an explicit micro-batch
// count (the text's, else plan_micro_batches for this plan), which actions on strategies keep:
// an episode's m is its initial plan's.
Plan resolve_plan(const std::string& text, const ModelSpec& model, const ClusterSpec& cluster);

}  // namespace shardgym
