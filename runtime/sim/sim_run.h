// SimRun: a simulated tensor-parallel training run (env id "shardgym/TPSim-v0").
//
// The cost of a plan is the sum of its blocks' costs (cost_model.h) plus what joins them:
// activation redistribution between neighbouring blocks whose layouts differ, the embedding
// and LM head, and the repartition of every block whose strategy changed (layout.h). One
// iteration is SPMD over all ranks, so each block is charged at its slowest rank / group.
// The embedding output takes block 0's layout for free (token ids are on every rank); the LM
// head is data-parallel, so the last block's output is redistributed to it. Strategies are
// shape-checked under the current sequence length and batch (events may change them).
//
// Time. Events of the scenario fire by env step: the measurement of step k (0-based, the
// (k+1)-th call of step()) runs under every event with `step ≤ k`. context(), estimate() and
// action_mask() describe the conditions of the step about to be taken.
//
// Speed. Costs are cached per (block kind, strategy) and per pair of layouts, computed on
// first use and invalidated only when the conditions change (an event, or reset to different
// conditions), so step() is O(blocks) lookups plus the noise draws.
//
// Threads. const methods fill the caches: use one run per thread (clone() for more). Runs on
// other threads may share their transfer costs through construction (SimOptions::costs).
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
//
// Uneven data shares and lost ranks (core/data_shares.h, core/scenario.h). The plan's shares
// are part of its pipeline: they set each stage's per-rank work (CostModel, Conditions::work),
// a share group that leaves its weight of 0 receives its blocks' state from another group, and
// a plan that trains on a lost rank (a rank_loss event, no rank_join yet) pays a checkpoint
// restart on a spare (RestartModel) in that step's repartition time, after which the spare
// stands in for the rank until it rejoins. Context: each rank's slowdown and liveness.
//
// Noise. Per block one compute factor (fwd and bwd) and one communication factor, one factor
// each for redistribution, LM head and repartition, and one per link class for the measured
// bandwidths: log-normal, mean 1, σ = Scenario::noise (noise.h), seeded by reset(seed).
//
// Length: SimRun's cache tables and their inline lookups are declared here so that the step's
// hot path inlines them (`bench sim`); splitting the run from a shared pricer is open work.
#pragma once

#include <array>
#include <map>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/experiment_spec.h"
#include "runtime/core/training_run.h"
#include "runtime/sim/calibration.h"
#include "runtime/sim/cost_model.h"
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
  double tail_s = 0;         // exposed gradient reduction + parameter gather + optimizer step
  double in_flight = 0;      // micro-batches whose activations the stage holds at its peak
  double peak_memory_bytes = 0, capacity_bytes = 0;
};

struct IterationBreakdown {
  Pipeline pipeline;         // m explicit
  double schedule_s = 0;     // the schedule of all micro-batches (pipeline_model.h)
  double p2p_s = 0;          // what stage-to-stage transfers add to the schedule
  double bubble_fraction = 0;  // (p−1)/(m·v + p − 1): idle share of equal stages
  double head_s = 0;         // LM head + loss of one micro-batch, on the last stage
  double head_sync_s = 0;    // embedding / LM head gradient reduction, embedding_sync_s included
  double embedding_sync_s = 0;  // of it, pipelines: the word embedding's all-reduce between
                                // the first and the last stage
  double step_latency_s = 0;   // schedule + p2p + head sync + the slowest stage's tail
  std::vector<StageTimes> stages;
  std::vector<int> block_stage;
  std::vector<BlockCost> blocks;  // per micro-batch on the block's stage, with collectives
  // Per micro-batch: activations into block b from block b − 1 of the same stage (fwd + bwd;
  // a stage boundary sends point to point instead), and from the last block to the LM head.
  std::vector<double> redistribution_s;
  double head_redistribution_s = 0;
};

// The transfer costs that runs built from one ExperimentSpec and SimOptions share (the envs of
// a vector env, the sim backend's sibling envs): activation redistribution and repartition of
// the catalog's layouts, per scenario phase and pipeline shape, priced once for all of them
// and read from one table instead of one copy per run. Thread-safe (sim_run_cache.cpp).
class SimCostShare;
std::shared_ptr<SimCostShare> new_sim_cost_share();

struct SimOptions {
  Calibration calibration = default_calibration();
  CostTerms terms;
  // Runs constructed with the same share share their transfer costs (empty: none). Every run
  // joining it must come from the same spec and options as the first; one that visibly does
  // not (model, world, catalog, events, layouts) is refused with std::invalid_argument.
  std::shared_ptr<SimCostShare> costs;
};

class SimRun : public TrainingRun {
 public:
  // Throws std::invalid_argument if the model, cluster or scenario is inconsistent (unknown
  // link class or rank in an event, a degree that does not divide the world, ...).
  explicit SimRun(const ExperimentSpec& spec, SimOptions options = {});

  std::string backend() const override { return "sim"; }
  const ModelSpec& model() const override { return model_; }
  const ClusterSpec& cluster() const override { return cost_.cluster(); }
  const StrategyCatalog& catalog() const override { return catalog_; }

  void reset(uint64_t seed, const Plan& initial) override;
  void step_into(const Plan& plan, Measurement& out) override;
  const Plan& plan() const override { return plan_; }
  void context_into(RunContext& out) const override;
  void action_mask_rows_into(int first, int count, uint8_t* out) const override;
  std::optional<Measurement> estimate(const Plan& plan) const override;
  // estimate(plan)'s "ok and not out of memory", from the blocks' memory alone (no times, no
  // transfers): what the masks of share choices ask for every choice at every step.
  bool fits(const Plan& plan) const override;
  bool deterministic() const override { return true; }
  bool cloneable() const override { return true; }
  std::unique_ptr<TrainingRun> clone() const override;
  std::unique_ptr<TrainingRun> clone_holding(const Plan& plan) const override;

  // The cost model under the conditions of the next step (for reports and tests): the whole
  // cluster, for a whole-iteration model; stage_cost_model(s) is what block costs use.
  const CostModel& cost_model() const { return cost_; }
  const CostModel& stage_cost_model(int stage) const { return stage_cost_.at(stage); }
  // Stage by stage, block by block: where an iteration of `plan` goes under the conditions of
  // the next step (the plan in force is unchanged). Throws std::invalid_argument if `plan` is
  // not valid here.
  IterationBreakdown breakdown(const Plan& plan) const;
  // Pipeline and micro-batches of the plan in force (m explicit).
  const Pipeline& pipeline() const { return pipe_; }
  const Scenario& scenario() const { return scenario_; }


 private:
  friend class SimCostShare;  // holds TransferSlot tables
  struct BlockSlot {  // cached BlockCost summary of one (kind, entry)
    uint32_t gen = 0;
    double fwd = 0, bwd = 0, comm = 0, busy_j = 0, link_j = 0;
    double grad_sync = 0, param_gather = 0, optimizer = 0, params = 0;
    double state = 0, act = 0, act_prev = 0;  // act: per micro-batch
    double state_moved = 0;  // state bytes a stage move sends (before memory calibration)
    double host = 0;         // per micro-batch: the host's issue time (BlockCost::host_s)
  };
  // Block-cost rows, [2·stage + kind] → one slot per entry. A row may be an immutable copy
  // shared with other runs that built the very same bytes (share(); 64 envs then read one
  // row instead of 64); writing to it (mut) first takes a private copy, and copying a
  // BlockRows copies the private rows, so a run never writes what another reads.
  class BlockRows {
   public:
    using Row = std::vector<BlockSlot>;
    BlockRows() = default;
    BlockRows(const BlockRows& o);
    BlockRows& operator=(const BlockRows& o) { return *this = BlockRows(o); }
    BlockRows(BlockRows&&) = default;
    BlockRows& operator=(BlockRows&&) = default;
    void assign(size_t rows, size_t entries);  // fresh private rows of empty slots
    size_t size() const { return rows_.size(); }
    const Row& operator[](size_t i) const { return *rows_[i]; }
    Row& mut(size_t i);
    void share(size_t i);  // swaps row i for the shared copy of its bytes

   private:
    std::vector<std::shared_ptr<Row>> rows_;
    std::vector<uint8_t> shared_;
  };
  // Cached TransferCost of one pair of layouts. In a run's own tables `gen` is the cache
  // generation it was filled for; in a share's (SimOptions::costs) it is 1 once the figures are
  // written, which happens once, under the group's mutex (release), so that runs on other
  // threads read them after an acquire load of `gen` (a plain load on x86) and no lock.
  struct TransferSlot {
    std::atomic<uint32_t> gen{0};
    double time = 0, bytes = 0, energy = 0;
    double message = 0;   // repartitions: largest message of a rank, bytes
    double messages = 0;  // repartitions: most messages one rank sends and receives
    // Repartitions from or to an uneven layout: each rank's part (TransferCost::rank_moves);
    // null otherwise.
    std::shared_ptr<const std::vector<RankMove>> ranks;
    TransferSlot() = default;
    TransferSlot(const TransferSlot& o) : gen(o.gen.load(std::memory_order_relaxed)) { copy(o); }
    TransferSlot& operator=(const TransferSlot& o) {
      gen.store(o.gen.load(std::memory_order_relaxed), std::memory_order_relaxed);
      copy(o);
      return *this;
    }
    void copy(const TransferSlot& o) {
      time = o.time, bytes = o.bytes, energy = o.energy, message = o.message;
      messages = o.messages, ranks = o.ranks;
    }
    void set(const TransferCost& c) {
      time = c.time_s, bytes = c.bytes, energy = c.energy_j, message = c.max_message_bytes;
      messages = c.max_rank_messages;
      ranks = c.rank_moves.empty() ? nullptr
                                   : std::make_shared<const std::vector<RankMove>>(c.rank_moves);
    }
  };

  // Sets up the stages and micro-batches of `pipe` (m explicit); returns whether it changed.
  bool configure(const Pipeline& pipe) const;
  Pipeline resolved_pipeline(const Plan& plan) const;
  int entry_of(const Strategy& s) const;  // adds strategies outside the catalog
  int entry_of(const Strategy& s, uint64_t key) const;
  std::string resolve(const Plan& plan, std::vector<int>& idx) const;  // "" or the error
  void ensure_shapes() const;  // shape_ok_ for the current model
  // Why catalog entry `entry` cannot run a block of `kind` under the pipeline in force: its
  // shape, or a degree that does not divide a data-share group; empty when it can.
  std::string why_invalid(int kind, int entry) const;
  const HeadCost& head() const;  // on the last stage
  // The framework's own work of one micro-batch on a stage: once per model chunk, as
  // Megatron-LM's interleaved schedule calls forward_step and backward_step for each of the
  // v chunks of a micro-batch (schedules.py, forward_backward_pipelining_with_interleaving).
  double loop_host_s(const HeadCost& h) const {
    return pipe_.schedule == Schedule::kInterleaved ? h.loop_host_s * pipe_.virtual_stages
                                                    : h.loop_host_s;
  }
  const BlockSlot& block(int kind, int entry) const { return block(0, kind, entry); }
  // Cached costs; the fill_* functions compute a stale or missing slot (the hot path is inline).
  const BlockSlot& block(int stage, int kind, int entry) const {
    const BlockSlot& s = block_cache_[2 * stage + kind][entry];
    return s.gen == gen_ ? s : fill_block(stage, kind, entry);
  }
  const BlockSlot& fill_block(int stage, int kind, int entry) const;
  // Transfer costs: a run of a group reads the pairs of the catalog's layouts straight from
  // the group's tables (one copy for all the envs of a vector env, instead of a private copy
  // per env in front of it); a run alone, and layouts outside the catalog, use its own tables.
  const TransferSlot& redistribution(int stage, int from_entry, int to_entry) const {
    const int a = act_id_[from_entry], z = act_id_[to_entry];
    if (group_ && a < group_act_ && z < group_act_) {
      const TransferSlot& s = group_slots(stage, -1)[size_t(a) * group_act_ + z];
      if (s.gen.load(std::memory_order_acquire)) return s;
      return fill_redistribution(stage, from_entry, to_entry);
    }
    const TransferSlot& s = redist_cache_[stage][size_t(a) * act_stride_ + z];
    return s.gen.load(std::memory_order_relaxed) == transfer_gen_
               ? s
               : fill_redistribution(stage, from_entry, to_entry);
  }
  const TransferSlot& fill_redistribution(int stage, int from_entry, int to_entry) const;
  // Embedding state on the first stage, LM head state and logits on the last (adds to `out`).
  void edge_memory(const std::vector<int>& idx, std::vector<double>& out) const;
  const TransferSlot& repartition(int stage, int kind, int from_entry, int to_entry) const;
  double memory_of(const std::vector<int>& idx) const;
  // Peak memory of each stage's ranks for plan `idx` (pipe_ in force).
  void stage_memory(const std::vector<int>& idx, std::vector<double>& out) const;
  // The same from memory_cache_ (or block_cache_ where it is filled): no block times computed.
  void stage_memory_only(const std::vector<int>& idx, std::vector<double>& out) const;
  // For a model with live_layers: each stage's peak as the live ranks hold it
  // (runtime/core/live_memory.h); the calibration's memory scales do not apply.
  void live_stage_memory(const std::vector<int>& idx, std::vector<double>& out) const;
  // Memory-fit tables of action_mask (sim_run_mask.cpp): for each group of catalog entries,
  // their own memory term sorted, and the mask rows admitting the first n of them.
  struct MaskTable {
    std::vector<double> values;
    std::vector<uint8_t> prefix;  // (values.size() + 1) rows of catalog-size bytes
  };
  // 0/1: attention entries without / with recompute (own state + activations); 2/3: MLP
  // entries after an attention without / with recompute.
  using MaskTables = std::array<MaskTable, 4>;
  // Builds the tables for gen_, then shares them: runs whose tables come out byte for byte
  // the same (the envs of a vector env, under the same conditions) hold one immutable copy
  // (sim_run_mask.cpp keeps a process-wide index of the live ones, under a mutex). 64 envs
  // then read 60 KB of tables instead of 64 × 60 KB, which no core's cache holds.
  void ensure_mask_tables() const;
  // The last row action_mask_into built for each block kind: what it depended on (cache
  // generation, memory of the plan in force, the block's entry and its neighbour's) and the
  // prefix rows it took (row numbers, not pointers, so a clone stays valid). The blocks of a
  // plan that repeats one strategy then share one pair of binary searches.
  struct MaskMemo {
    uint32_t gen = 0;
    double memory = -1;
    int entry = -1, neighbour = -1;
    size_t first = 0, second = 0;  // rows of mask_tables_ (attention: plain, recompute)
  };
  // The move from `from` (nullptr: none) into idx, blocks of `from` on the stages
  // `from_stage` of `from_stage_world` ranks each (sim_run_repartition.cpp); noise-free.
  struct RepartitionSums {
    double seconds = 0, bytes = 0, energy_j = 0, peak_bytes = 0;
  };
  RepartitionSums price_repartition(const std::vector<int>& idx, const std::vector<int>* from,
                                    const std::vector<int>& from_stage, int from_stage_world) const;
  // price_repartition's running sums, and its two kinds of block move: to another stage's
  // ranks, and a new layout on the same ranks. held: what the blocks moved so far added to
  // every rank (transit_held_ per rank instead once per_rank).
  struct TransitSums {
    double seconds = 0, bytes = 0, energy_j = 0, peak = 0, held = 0, messages = 0;
    bool per_rank = false;
    int changed = 0, moved_blocks = 0;  // strategies changed; blocks whose state moved
  };
  void price_stage_move(int b, int a, int z, int from_st, int from_stage_world, double both,
                        TransitSums& t) const;
  void price_block_move(int b, int a, int z, double both, TransitSums& t) const;
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
                              int to_first) const;
  // The embedding, final norm and LM head moving to the ranks that join the first or the last
  // stage when the stage size changes from `from_stage_world` to P/p.
  struct OuterMove {
    double seconds = 0, bytes = 0, energy_j = 0;
    std::vector<double> received;  // bytes, per rank of the world
  };
  OuterMove price_outer_move(int from_stage_world) const;
  RepartitionSums price_group_join(const std::vector<int>& idx, int donor, int joiner,
                                   int g) const;
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
                  const StageSums& acc, Measurement& out, Energy& e) const;
  double latency_with_transfers(const StageSums& acc, int p, IterationBreakdown* bd,
                                double& schedule_s) const;
  double iteration_tail(const std::vector<int>& idx, const StageSums& acc, int p, double nh,
                        IterationBreakdown* bd) const;
  void fill_memory(Measurement& out) const;
  // Fills `out` for running `idx` after `from` (nullptr: no repartition), whose blocks were
  // on the stages `from_stage` of `from_stage_world` ranks each (the pipeline in force before,
  // which may have another stage count). noise: nullptr = none.
  // `stages` (optional) receives the per-stage figures.
  void evaluate(const std::vector<int>& idx, const std::vector<int>* from,
                const std::vector<int>& from_stage, int from_stage_world, LogNormalNoise* noise,
                Measurement& out, IterationBreakdown* stages = nullptr) const;
  Conditions conditions_at(const ScenarioState& state) const;  // the model's, as it says
  // Whether a plan with `pipe`'s data shares trains on a lost rank that no spare stands in for
  // (those ranks appended to `ranks`): then the step restarts from a checkpoint.
  bool needs_spare(const Pipeline& pipe, std::vector<int>* ranks = nullptr) const;
  void charge_restart(Measurement& m) const;  // scenario.h RestartModel
  void install(int step);  // the scenario's state at `step`; invalidates the caches if it differs
  // The group's slots of one table under the conditions in force (group_ set): kind < 0,
  // redistribution on `stage` (group_act_² slots), else repartition of (stage, kind)
  // (group_param_²), each row-major by (from, to) layout id.
  TransferSlot* group_slots(int stage, int kind) const {
    if (group_tables_gen_ != gen_) bind_group_tables();
    return kind < 0 ? group_redist_ + size_t(stage) * group_act_ * group_act_
                    : group_repart_ + size_t(2 * stage + kind) * group_param_ * group_param_;
  }
  void bind_group_tables() const;  // the group's tables for the conditions in force
  // Computes a transfer cost into a slot of the group's (once; returns the slot).
  template <typename Cost>
  const TransferSlot& publish(TransferSlot& slot, Cost&& cost) const;
  void draw_link_measurement();

  ModelSpec model_;
  Scenario scenario_;
  StrategyCatalog catalog_;
  CostModel cost_;
  Calibration calibration_;
  CostTerms terms_;
  // Stages of the pipeline in force: their cost models, block stages, activations in flight.
  mutable Pipeline pipe_;
  mutable std::vector<CostModel> stage_cost_;
  mutable std::vector<int> block_stage_;
  mutable std::vector<double> in_flight_;
  mutable std::vector<double> stage_scratch_;
  mutable Plan live_plan_;  // live_stage_memory's plan, kept to reuse its blocks' storage
  mutable std::vector<int> fits_idx_;  // fits()'s entries, kept to spare an allocation a call
  mutable std::vector<double> stage_acc_;  // evaluate()'s per-stage sums, 12 per stage
  // edge_memory()'s figures for the first / last stage, valid for gen_ and those degrees.
  mutable uint32_t edge_gen_ = 0;
  mutable int edge_t_[2] = {0, 0};
  mutable double edge_[2] = {0, 0};  // parameters and optimizer state of the first / last stage
  mutable double edge_act_ = 0;       // the LM head's activations of one micro-batch
  // Micro-batches whose head activations the last stage holds (set with in_flight_).
  mutable double head_in_flight_ = 1;
  mutable std::vector<double> stage_capacity_;  // smallest device memory of each stage
  double idle_power_w_ = 0;                     // Σ_ranks idle_w
  mutable int stage_world_ = 0;
  int blocks_ = 0;
  int world_ = 0;
  std::vector<int> event_steps_;  // distinct event steps, sorted
  double max_slowdown_ = 1;

  // Strategies known to the caches: the catalog's, then any other a plan used.
  mutable std::vector<Strategy> entries_;
  mutable std::vector<int> act_id_, param_id_;  // dense layout ids of each entry
  mutable std::vector<uint32_t> act_keys_;
  mutable std::vector<uint64_t> param_keys_;
  mutable std::vector<uint64_t> entry_keys_;  // exact packed key of each entry
  mutable std::vector<uint8_t> recomputes_;   // entries_[e].recompute, one byte each (hot)
  mutable std::vector<uint64_t> hash_keys_;
  mutable std::vector<int> hash_slots_;  // open addressing: strategy key → entry
  int dp_entry_ = 0;

  // Caches, valid while their stamp equals gen_.
  mutable uint32_t gen_ = 1;
  // Per stage: [2·stage + kind] / [stage] / [2·stage + kind].
  mutable BlockRows block_cache_;
  // fits()'s memory-only slots, [2·stage + kind] → entry, stamped with gen_ like block_cache_.
  struct MemorySlot {
    uint32_t gen = 0;
    double state = 0, act = 0, act_prev = 0;
  };
  mutable std::vector<std::vector<MemorySlot>> memory_cache_;
  mutable std::vector<std::vector<TransferSlot>> redist_cache_;   // act ids, stride act_stride_
  mutable std::vector<std::vector<TransferSlot>> repart_cache_;   // param ids, stride param_stride_
  // redist_cache_ and repart_cache_ are stamped with transfer_gen_ instead: moving activations
  // and state depends on the stages, the (micro-)batch shape and the links, not on the data
  // shares or the ranks' speeds (layout.h), so a change of shares alone keeps them. Without
  // this every share choice the env's mask prices (env/share_action.h) recomputed the
  // exchange geometry of every block: 90 % of PPO's training time on the suite's tasks.
  mutable uint32_t transfer_gen_ = 1;
  mutable std::vector<double> transfer_sig_;  // what transfer_gen_ was stamped for
  mutable int act_stride_ = 0, param_stride_ = 0;
  mutable std::vector<uint8_t> shape_ok_[2];
  mutable uint32_t shape_gen_ = 0;
  mutable std::array<int64_t, 6> shape_sig_{};  // what shape_ok_ was computed for
  mutable bool shape_valid_ = false;
  mutable std::shared_ptr<const MaskTables> mask_tables_;
  mutable uint32_t mask_gen_ = 0;
  mutable MaskMemo mask_memo_[2];
  mutable std::vector<uint32_t> row_hint_;  // per block: its last counts (table rows) of
                                            // action_mask_into, 2 per block
  mutable double current_mem_ = -1;  // memory of the plan in force; < 0: not computed
  mutable HeadCost head_;
  mutable uint32_t head_gen_ = 0;

  // The shared transfer costs (SimOptions::costs); its ids are those of the entries the
  // constructor registered.
  void join(std::shared_ptr<SimCostShare> share);
  std::shared_ptr<SimCostShare> group_;
  int group_act_ = 0, group_param_ = 0;  // layouts of the catalog (and dp): ids below these
  int installed_phase_ = 0;              // phase whose conditions are installed
  mutable TransferSlot* group_redist_ = nullptr;  // the group's slots for gen_'s conditions
  mutable TransferSlot* group_repart_ = nullptr;
  mutable uint32_t group_tables_gen_ = 0;

  // Episode state.
  LogNormalNoise noise_;
  int step_ = 0;
  Plan plan_;
  std::vector<int> idx_;            // entries of the plan in force
  std::vector<uint64_t> idx_keys_;  // their keys (entry_keys_), block by block
  uint32_t idx_gen_ = 0;            // gen_ under which resolve() accepted them
  std::vector<double> measured_link_;
  std::vector<uint8_t> lost_;      // per rank, under the conditions installed
  bool any_lost_ = false;
  bool rank_events_ = false;  // the scenario has straggler or rank loss events
  std::vector<uint8_t> replaced_;  // per rank: a spare stands in for the lost rank (restart paid)
  std::vector<int> spare_scratch_;
  mutable std::vector<int> scratch_;
  mutable std::vector<int> before_stage_;  // block stages before the plan being resolved
  mutable std::map<std::array<int, 7>, StageMove> stage_moves_;  // stage_move's
  mutable std::vector<double> transit_held_;  // evaluate(): memory in transit per rank (uneven)
};

}  // namespace shardgym
