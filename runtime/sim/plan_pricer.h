// PlanPricer: what a plan costs under one set of conditions (docs/design.md §4), for SimRun.
//
// The cost of a plan is the sum of its blocks' costs (cost_model.h) plus what joins them:
// activation redistribution between neighbouring blocks whose layouts differ, the embedding
// and LM head, and the repartition of every block whose strategy changed (layout.h). One
// iteration is SPMD over all ranks, so each block is charged at its slowest rank / group.
// The embedding output takes block 0's layout for free (token ids are on every rank); the LM
// head is data-parallel, so the last block's output is redistributed to it. Strategies are
// shape-checked under the current sequence length and batch (events may change them).
//
// Micro-batches and stages (plan.h). Block costs are per micro-batch of the plan's m, on the
// cost model of the block's pipeline stage (the stage's ranks as a cluster of their own). A
// stage's micro-batch time is its blocks' forward + backward + exposed TP communication, its
// activation redistributions and p2p sends, plus the LM head on the last stage; the
// schedule (pipeline_model.h) turns them into the iteration time. Then, per stage, the
// data-parallel gradient reduction (overlapped with the last micro-batch's backward in
// Megatron-LM's 40M-parameter buckets with overlap_grad_reduce), the distributed optimizer's
// parameter all-gather (under the next first forward with overlap_param_gather) and the
// optimizer step; the slowest stage's tail counts. Peak memory per rank is its stage's state
// plus its activations × the micro-batches in flight of the schedule; the fullest stage is
// the one reported (all ranks of a stage hold the same bytes).
//
// Repartition. A block whose strategy changes within its stage moves the bytes of layout.h;
// a block that a moved stage boundary puts on another stage is received whole (its state:
// parameters, gradients, optimizer state, as its new strategy shards them) by the new stage's
// ranks from the old stage's, point to point over the link between them, ranks in parallel.
// Uneven data shares (core/data_shares.h) set each stage's per-rank work (Conditions::work),
// and a share group that leaves its weight of 0 receives its blocks' state from another group.
//
// What the pricer holds, and what it does not. It knows the spec (model, cluster, catalog,
// calibration) and the conditions and pipeline installed (set_conditions, configure); it
// does not know the episode: the step, the noise, the plan in force and the ranks lost are
// SimRun's (sim_run.h), passed in where a price depends on them (PlanEntries, the shares
// before a move). Costs are computed on first use and kept, so a step is O(blocks) lookups.
//
// Where the costs are kept: in a SimCostShare (cost_share.h), thread-safe, which holds every
// figure of the catalog's strategies keyed by what it depends on. Runs built with one share
// (SimOptions::costs: the envs of a vector env, the sim backend's sibling envs, Python's
// vector envs through them) price each figure once for all; a run built without one has a
// share of its own. The pricer itself is the run's cursor into the share: the tables bound
// for the conditions installed, the strategies outside the catalog a plan used (their figures
// in its own slots, invalidated by a cache generation), and per-call scratch. So one run per
// thread (a clone copies its cursor and shares its share); any number of runs on any threads
// per share.
//
// Length: the lookups of the step's hot path are inline here, with the per-run state they
// read (`bench sim`); the tables they read are in cost_share.h.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/catalog.h"
#include "runtime/core/measurement.h"
#include "runtime/core/plan.h"
#include "runtime/core/scenario.h"
#include "runtime/sim/calibration.h"
#include "runtime/sim/cost_model.h"
#include "runtime/sim/cost_share.h"
#include "runtime/sim/noise.h"

namespace shardgym {

// Where one iteration of a plan goes, stage by stage (SimRun::breakdown, `shardgym cost`).
// Noise-free; times in seconds, per rank of the stage.
struct StageTimes {
  int first_block = 0, blocks = 0;  // blocks [first_block, first_block + blocks)
  int first_rank = 0, ranks = 0;    // ranks [first_rank, first_rank + ranks)
  double micro_batch_s = 0;  // one micro-batch: fwd + bwd + exposed TP comm + redistributions
                             // (+ the LM head on the last stage), at least host_s
  double host_s = 0;         // one micro-batch's host issue time (docs/design.md §4)
  double grad_sync_s = 0, param_gather_s = 0, optimizer_s = 0;  // iteration, before overlap
  double tail_s = 0;     // exposed gradient reduction + parameter gather + optimizer step
  double in_flight = 0;  // micro-batches whose activations the stage holds at its peak
  double peak_memory_bytes = 0, capacity_bytes = 0;
};

struct IterationBreakdown {
  Pipeline pipeline;            // m explicit
  double schedule_s = 0;        // the schedule of all micro-batches (pipeline_model.h)
  double p2p_s = 0;             // what stage-to-stage transfers add to the schedule
  double bubble_fraction = 0;   // (p−1)/(m·v + p − 1): idle share of equal stages
  double head_s = 0;            // LM head + loss of one micro-batch, on the last stage
  double head_sync_s = 0;       // embedding / LM head gradient reduction, embedding_sync_s included
  double embedding_sync_s = 0;  // of it, pipelines: the word embedding's all-reduce between
                                // the first and the last stage
  double step_latency_s = 0;    // schedule + p2p + head sync + the slowest stage's tail
  std::vector<StageTimes> stages;
  std::vector<int> block_stage;
  std::vector<BlockCost> blocks;  // per micro-batch on the block's stage, with collectives
  // Per micro-batch: activations into block b from block b − 1 of the same stage (fwd + bwd;
  // a stage boundary sends point to point instead), and from the last block to the LM head.
  std::vector<double> redistribution_s;
  double head_redistribution_s = 0;
};

struct SimOptions {
  Calibration calibration = default_calibration();
  CostTerms terms;
  // Runs constructed with the same share share their costs (empty: the run makes its own).
  // Every run joining it must come from the same spec and options as the first; one that
  // visibly does not (model, world, catalog, events, layouts, or a probe of its costs that
  // the devices, links, calibration and terms enter) is refused with std::invalid_argument.
  std::shared_ptr<SimCostShare> costs;
};

// Throws std::invalid_argument naming the model or the cluster if it is not valid.
void check_sim_spec(const ModelSpec& model, const ClusterSpec& cluster);

// A plan as the pricer's entries, block by block, with their keys and the cache generation
// under which resolve() accepted them (the plan in force: resolve() trusts its unchanged
// blocks while the generation holds).
struct PlanEntries {
  std::vector<int> idx;
  std::vector<uint64_t> keys;
  uint32_t gen = 0;
};

class PlanPricer {
 public:
  // `initial`: the conditions of step 0; `plan`: the initial plan, whose pipeline is installed;
  // `events`: the scenario's, for the check of runs that share costs (SimOptions::costs).
  // Throws std::invalid_argument if the model or the cluster is not valid.
  PlanPricer(const ModelSpec& model, const ClusterSpec& cluster, const CatalogOptions& catalog,
             SimOptions options, const Conditions& initial, const Plan& plan,
             const std::vector<ScenarioEvent>& events);

  const ModelSpec& model() const { return model_; }  // as configured (no event applied)
  const StrategyCatalog& catalog() const { return catalog_; }
  // The whole cluster under the conditions installed; stage_cost_model(s) is what block
  // costs use.
  const CostModel& cost_model() const { return cost_; }
  const CostModel& stage_cost_model(int stage) const;  // std::out_of_range outside [0, p)
  const Conditions& conditions() const { return cost_.conditions(); }
  const Pipeline& pipeline() const { return pipe_; }  // installed, m explicit
  const std::vector<int>& block_stages() const { return block_stage_; }
  int stage_world() const { return stage_world_; }
  double min_capacity() const;                           // the smallest device memory of any stage
  double idle_power_w() const { return idle_power_w_; }  // Σ_ranks idle_w
  uint32_t generation() const { return gen_; }           // changes with conditions and stages
  const Strategy& entry(int e) const { return entries_[e]; }
  uint64_t entry_key(int e) const { return entry_keys_[e]; }

  // Installs the conditions `c` (the pipeline kept): where they differ from those installed,
  // the tables of `c` are bound instead (found in the share, or made).
  void set_conditions(const Conditions& c);
  // Sets up the stages and micro-batches of `pipe` (m explicit); returns whether it changed.
  bool configure(const Pipeline& pipe);
  // The plan's entries into `idx` ("" or the reason it is not valid here); installs the
  // plan's pipeline. `in_force`: the plan in force, whose unchanged blocks skip the checks.
  std::string resolve(const Plan& plan, const PlanEntries& in_force, std::vector<int>& idx);

  // Fills `out` for running `idx` (resolved: its pipeline installed) after `from` (nullptr:
  // no repartition), whose blocks were on the stages `from_stage` of `from_stage_world` ranks
  // each with the data shares `from_shares` (the pipeline in force before, which may have
  // another stage count). noise: nullptr = none. `bd` (optional) receives the per-stage
  // figures.
  void evaluate(const std::vector<int>& idx, const std::vector<int>* from,
                const std::vector<int>& from_stage, int from_stage_world,
                const std::vector<int>& from_shares, LogNormalNoise* noise, Measurement& out,
                IterationBreakdown* bd = nullptr);
  // Stage by stage, block by block (resolved `idx`, noise-free).
  IterationBreakdown breakdown(const std::vector<int>& idx);
  // Whether every stage of `idx` fits its ranks' memory, from the blocks' memory alone.
  bool fits_memory(const std::vector<int>& idx);
  // Mask rows of blocks [first, first + count) with the other blocks as `in_force` has them:
  // the catalog entries whose shape is valid and whose plan fits memory (plan_pricer_mask.cpp).
  void mask_rows(const std::vector<int>& in_force, int first, int count, uint8_t* out);
  // A repartition as priced (price_repartition), noise-free: its time, bytes received over
  // all ranks, energy, memory in transit, and what the calibration's terms multiply
  // (RuntimeCalibration::repartition_*): whether any strategy or stage changed, the blocks
  // whose state moved, the messages.
  struct RepartitionSums {
    double seconds = 0, bytes = 0, energy_j = 0, peak_bytes = 0;
    bool changed = false;
    int moved_blocks = 0;
    double messages = 0;
  };
  // The repartition of the last evaluate() (calibrate fits the repartition terms against it).
  const RepartitionSums& last_repartition() const { return last_repartition_; }

  // The peak memory of the plan in force, where the caller measured it (the mask's base).
  void note_in_force_memory(double bytes) { current_mem_ = bytes; }
  void forget_in_force_memory() { current_mem_ = -1; }

 private:
  // The plan's pipeline under the conditions installed (a batch event changes Megatron-LM's m).
  Pipeline resolved_pipeline(const Plan& plan) const;
  int entry_of(const Strategy& s);  // adds strategies outside the catalog
  int entry_of(const Strategy& s, uint64_t key);
  void ensure_shapes();  // shape_ok_ for the current model
  // Why catalog entry `entry` cannot run a block of `kind` under the pipeline in force: its
  // shape, or a degree that does not divide a data-share group; empty when it can.
  std::string why_invalid(int kind, int entry);
  const HeadCost& head();  // on the last stage
  // The framework's own work of one micro-batch on a stage: once per model chunk, as
  // Megatron-LM's interleaved schedule calls forward_step and backward_step for each of the
  // v chunks of a micro-batch (schedules.py, forward_backward_pipelining_with_interleaving).
  double loop_host_s(const HeadCost& h) const {
    return pipe_.schedule == Schedule::kInterleaved ? h.loop_host_s * pipe_.virtual_stages
                                                    : h.loop_host_s;
  }
  const BlockSlot& block(int kind, int entry) { return block(0, kind, entry); }
  // Cached costs; the fill_* functions compute a stale or missing slot (the hot path is inline).
  // The catalog's entries are read from the share's rows for the conditions installed, any
  // other strategy from the pricer's own.
  const BlockSlot& block(int stage, int kind, int entry) {
    if (entry < group_entries_) {
      const BlockSlot& s = group_block_[size_t(2 * stage + kind) * group_entries_ + entry];
      return s.gen.load(std::memory_order_acquire) ? s : fill_block(stage, kind, entry);
    }
    const BlockSlot& s = own_block_[2 * stage + kind][entry - group_entries_];
    return s.gen.load(std::memory_order_relaxed) == gen_ ? s : fill_block(stage, kind, entry);
  }
  const BlockSlot& fill_block(int stage, int kind, int entry);
  // The memory figures of (stage, kind, entry): its block slot's where that is filled, else
  // computed alone (no times).
  MemoryFigures block_memory(int stage, int kind, int entry);
  // A block's memory in bytes as the calibration's memory scales count it.
  MemoryFigures memory_figures(double state, double act, double act_prev) const;
  // Transfer costs: the pairs of the catalog's layouts are read straight from the share's
  // tables (one copy for all the envs of a vector env, instead of a private copy per env in
  // front of it); layouts outside the catalog from the pricer's own.
  const TransferSlot& redistribution(int stage, int from_entry, int to_entry) {
    const int a = act_id_[from_entry], z = act_id_[to_entry];
    if (a < group_act_ && z < group_act_) {
      const TransferSlot& s = group_slots(stage, -1)[size_t(a) * group_act_ + z];
      if (s.gen.load(std::memory_order_acquire)) return s;
      return fill_redistribution(stage, from_entry, to_entry);
    }
    const TransferSlot& s = redist_cache_[stage][size_t(a) * act_stride_ + z];
    return s.gen.load(std::memory_order_relaxed) == transfer_gen_
               ? s
               : fill_redistribution(stage, from_entry, to_entry);
  }
  const TransferSlot& fill_redistribution(int stage, int from_entry, int to_entry);
  // Embedding state on the first stage, LM head state and logits on the last (adds to `out`).
  void edge_memory(const std::vector<int>& idx, std::vector<double>& out);
  const TransferSlot& repartition(int stage, int kind, int from_entry, int to_entry);
  double memory_of(const std::vector<int>& idx);
  // Peak memory of each stage's ranks for plan `idx` (pipe_ in force).
  void stage_memory(const std::vector<int>& idx, std::vector<double>& out);
  // The same from the memory-only figures (block_memory): no block times computed.
  void stage_memory_only(const std::vector<int>& idx, std::vector<double>& out);
  // For a model with live_layers: each stage's peak as the live ranks hold it
  // (runtime/core/live_memory.h); the calibration's memory scales do not apply.
  void live_stage_memory(const std::vector<int>& idx, std::vector<double>& out);
  // The tables of the conditions installed, built by the first run of the share that asks and
  // kept in its PriceRows: 64 envs then read 60 KB of tables instead of 64 × 60 KB, which no
  // core's cache holds.
  void ensure_mask_tables();
  // The last row mask_rows built for each block kind: what it depended on (cache generation,
  // memory of the plan in force, the block's entry and its neighbour's) and the prefix rows it
  // took (row numbers, not pointers, so a clone stays valid). The blocks of a plan that
  // repeats one strategy then share one pair of binary searches.
  struct MaskMemo {
    uint32_t gen = 0;
    double memory = -1;
    int entry = -1, neighbour = -1;
    size_t first = 0, second = 0;  // rows of mask_tables_ (attention: plain, recompute)
  };
  // The move from `from` (nullptr: none) into idx, blocks of `from` on the stages
  // `from_stage` of `from_stage_world` ranks each (plan_pricer_repartition.cpp); noise-free.
  RepartitionSums price_repartition(const std::vector<int>& idx, const std::vector<int>* from,
                                    const std::vector<int>& from_stage, int from_stage_world,
                                    const std::vector<int>& from_shares);
  // price_repartition's running sums, and its two kinds of block move: to another stage's
  // ranks, and a new layout on the same ranks. held: what the blocks moved so far added to
  // every rank (transit_held_ per rank instead once per_rank).
  struct TransitSums {
    double seconds = 0, bytes = 0, energy_j = 0, peak = 0, held = 0, messages = 0;
    bool per_rank = false;
    int changed = 0, moved_blocks = 0;  // strategies changed; blocks whose state moved
  };
  void price_stage_move(int b, int a, int z, int from_st, int from_stage_world, double both,
                        TransitSums& t);
  void price_block_move(int b, int a, int z, double both, TransitSums& t);
  // A block of `kind` (0 attention, 1 MLP) moving from entry `from` on the ranks
  // [from_first, from_first + from_size) to entry `to` on [to_first, to_first + P/p)
  // (layout.h, stage_move_cost), cached per move: bytes received in all, by the rank that
  // receives most, the most messages of one rank, and each rank's part.
  struct StageMove {
    double bytes = 0, max_rank_bytes = 0;
    int messages = 0;
    std::vector<RankMove> ranks;  // every rank of the world (layout.h)
  };
  const StageMove& stage_move(int kind, int from, int from_first, int from_size, int to,
                              int to_first);
  // The embedding, final norm and LM head moving to the ranks that join the first or the last
  // stage when the stage size changes from `from_stage_world` to P/p.
  struct OuterMove {
    double seconds = 0, bytes = 0, energy_j = 0;
    std::vector<double> received;  // bytes, per rank of the world
  };
  OuterMove price_outer_move(int from_stage_world);
  RepartitionSums price_group_join(const std::vector<int>& idx, int donor, int joiner, int g);
  // evaluate()'s parts: the per-stage sums over stage_acc_ (12 arrays of one value per
  // stage), the energy terms, the blocks summed into them, the schedule with its stage-to-stage
  // transfers (p > 1; `schedule_s` set to the same without them where `bd` asks), the
  // iteration's tail after the flush, and each rank's peak memory.
  struct StageSums {
    double *mb, *fwd1, *bwd1, *sync, *gather, *opt, *params, *redist, *host, *hop, *fwd_share,
        *waits;
  };
  struct Energy {
    double busy_j = 0, link_j = 0, redist_j = 0;
  };
  void sum_blocks(const std::vector<int>& idx, LogNormalNoise* noise, double m,
                  const StageSums& acc, Measurement& out, Energy& e);
  double latency_with_transfers(const StageSums& acc, int p, IterationBreakdown* bd,
                                double& schedule_s);
  double iteration_tail(const std::vector<int>& idx, const StageSums& acc, int p, double nh,
                        IterationBreakdown* bd);
  void fill_memory(Measurement& out);
  // The group's slots of one table under the conditions in force: kind < 0,
  // redistribution on `stage` (group_act_² slots), else repartition of (stage, kind)
  // (group_param_²), each row-major by (from, to) layout id.
  TransferSlot* group_slots(int stage, int kind) {
    if (group_tables_gen_ != gen_) bind_group_tables();
    return kind < 0 ? group_redist_ + size_t(stage) * group_act_ * group_act_
                    : group_repart_ + size_t(2 * stage + kind) * group_param_ * group_param_;
  }
  void bind_group_tables();  // the group's transfer tables for the conditions in force
  // The group's PriceRows for the conditions and pipeline installed (`micro`: the model of one
  // micro-batch under them), built from stage_models where none is yet.
  void bind_rows(const ModelSpec& micro);
  std::vector<CostModel> stage_models(const ModelSpec& micro) const;
  // The shared costs (SimOptions::costs, or a share of its own); its ids are those of the
  // entries the constructor registered.
  void join(std::shared_ptr<SimCostShare> share, const std::vector<ScenarioEvent>& events);

  ModelSpec model_;
  StrategyCatalog catalog_;
  CostModel cost_;
  Calibration calibration_;
  CostTerms terms_;
  int blocks_ = 0;
  int world_ = 0;
  double idle_power_w_ = 0;  // Σ_ranks idle_w
  // Stages of the pipeline in force: their cost models, block stages, activations in flight.
  Pipeline pipe_;
  const CostModel* stage_cost_ = nullptr;  // rows_'s, one per stage
  int stages_ = 0;
  std::vector<int> block_stage_;
  std::vector<double> in_flight_;
  std::vector<double> stage_capacity_;  // smallest device memory of each stage
  int stage_world_ = 0;
  // Micro-batches whose head activations the last stage holds (set with in_flight_).
  double head_in_flight_ = 1;
  // Scratch kept to spare allocations: per-stage memory, evaluate()'s per-stage sums (12 per
  // stage), live_stage_memory's plan, memory in transit per rank (uneven moves).
  std::vector<double> stage_scratch_;
  std::vector<double> stage_acc_;
  Plan live_plan_;
  std::vector<double> transit_held_;
  // edge_memory()'s figures for the first / last stage, valid for gen_ and those degrees.
  uint32_t edge_gen_ = 0;
  int edge_t_[2] = {0, 0};
  double edge_[2] = {0, 0};  // parameters and optimizer state of the first / last stage
  double edge_act_ = 0;      // the LM head's activations of one micro-batch

  // Strategies known to the caches: the catalog's, then any other a plan used.
  std::vector<Strategy> entries_;
  std::vector<int> act_id_, param_id_;  // dense layout ids of each entry
  std::vector<uint32_t> act_keys_;
  std::vector<uint64_t> param_keys_;
  std::vector<uint64_t> entry_keys_;  // exact packed key of each entry
  std::vector<uint8_t> recomputes_;   // entries_[e].recompute, one byte each (hot)
  std::vector<uint64_t> hash_keys_;
  std::vector<int> hash_slots_;  // open addressing: strategy key → entry
  int dp_entry_ = 0;

  // Caches, valid while their stamp equals gen_.
  uint32_t gen_ = 1;
  // Block and memory-only slots of the entries outside the catalog, [2·stage + kind] →
  // entry − group_entries_ (the catalog's are in rows_).
  std::vector<std::vector<BlockSlot>> own_block_;
  std::vector<std::vector<MemorySlot>> own_memory_;
  std::vector<std::vector<TransferSlot>> redist_cache_;  // act ids, stride act_stride_
  std::vector<std::vector<TransferSlot>> repart_cache_;  // param ids, stride param_stride_
  // redist_cache_ and repart_cache_ are stamped with transfer_gen_ instead: moving activations
  // and state depends on the stages, the (micro-)batch shape and the links, not on the data
  // shares or the ranks' speeds (layout.h), so a change of shares alone keeps them. Without
  // this every share choice the env's mask prices (env/share_action.h) recomputed the
  // exchange geometry of every block: 90 % of PPO's training time on the suite's tasks.
  uint32_t transfer_gen_ = 1;
  std::vector<double> transfer_sig_;  // what transfer_gen_ was stamped for
  int act_stride_ = 0, param_stride_ = 0;
  std::vector<uint8_t> shape_ok_[2];
  uint32_t shape_gen_ = 0;
  std::array<int64_t, 6> shape_sig_{};  // what shape_ok_ was computed for
  bool shape_valid_ = false;
  const MaskTables* mask_tables_ = nullptr;  // rows_'s, for mask_gen_
  uint32_t mask_gen_ = 0;
  MaskMemo mask_memo_[2];
  std::vector<uint32_t> row_hint_;  // per block: its last counts (table rows) of mask_rows, 2
                                    // per block
  double current_mem_ = -1;         // memory of the plan in force; < 0: not computed
  RepartitionSums last_repartition_;  // evaluate()'s, for last_repartition()
  HeadCost head_;
  uint32_t head_gen_ = 0;
  std::map<std::array<int, 7>, StageMove> stage_moves_;  // stage_move's

  std::shared_ptr<SimCostShare> group_;
  int group_act_ = 0, group_param_ = 0;  // layouts of the catalog (and dp): ids below these
  int group_entries_ = 0;                // entries of the catalog (and dp): ids below this
  std::shared_ptr<PriceRows> rows_;      // the group's rows for gen_'s conditions and stages
  BlockSlot* group_block_ = nullptr;     // rows_'s slots
  MemorySlot* group_memory_ = nullptr;
  TransferTables* group_transfers_ = nullptr;  // the group's tables for gen_'s conditions
  TransferSlot* group_redist_ = nullptr;       // their slots
  TransferSlot* group_repart_ = nullptr;
  uint32_t group_tables_gen_ = 0;
};

}  // namespace shardgym
