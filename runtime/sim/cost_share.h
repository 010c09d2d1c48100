// SimCostShare: the costs that simulated runs share (docs/design.md §4, "The simulated run
// and its pricer"). A PlanPricer (plan_pricer.h) computes a figure on first use and keeps it
// here, keyed by what it depends on, for every run built with the same share:
// - per set of conditions and pipeline but for its split (PriceRows): the stages' cost
//   models, block figures per (stage, kind, catalog entry), memory-only figures, and the
//   action mask's memory tables;
// - per micro-batch shape, links and pipeline shape (TransferTables): activation
//   redistribution and repartition per pair of the catalog's layouts (they depend on neither
//   the ranks' speeds nor the data shares; layout.h).
//
// Threads. A figure is written once, under its table's mutex, with a release store of its
// slot's stamp, and read after an acquire load of the stamp (a plain load on x86) with no
// lock; the indexes are read and grown under the share's mutex. So any number of runs on any
// threads may price from one share; what is not shared (a pricer's cursor, the strategies
// outside the catalog a plan used) stays in each run.
//
// Trust. Every run that joins must come from the same spec and options as the first
// (SimCostShare::admit checks what is visible: model, world, catalog, events, layouts, and a
// probe of its costs that the devices, links, calibration and cost terms enter).
//
// Length: the slot types are complete here because the step's hot path (plan_pricer.h) reads
// them inline.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/scenario.h"
#include "runtime/core/strategy.h"
#include "runtime/sim/cost_model.h"
#include "runtime/sim/layout.h"

namespace shardgym {

// The figures of one (stage, kind, entry) kept from its BlockCost.
struct BlockFigures {
  double fwd = 0, bwd = 0, comm = 0, busy_j = 0, link_j = 0;
  double grad_sync = 0, param_gather = 0, optimizer = 0, params = 0;
  double state = 0, act = 0, act_prev = 0;  // act: per micro-batch
  double state_moved = 0;  // state bytes a stage move sends (before memory calibration)
  double host = 0;         // per micro-batch: the host's issue time (BlockCost::host_s)
};

// fits_memory()'s memory-only figures (as the block figures have them).
struct MemoryFigures {
  double state = 0, act = 0, act_prev = 0;
};

// A kept figure with its stamp: in a share's tables `gen` is 1 once written (publish()); in a
// pricer's own tables it is the cache generation it was filled for.
template <typename Figures>
struct CostSlot : Figures {
  std::atomic<uint32_t> gen{0};
  CostSlot() = default;
  CostSlot(const CostSlot& o) : Figures(o), gen(o.gen.load(std::memory_order_relaxed)) {}
  CostSlot& operator=(const CostSlot& o) {
    Figures::operator=(o);
    gen.store(o.gen.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
  }
};
using BlockSlot = CostSlot<BlockFigures>;
using MemorySlot = CostSlot<MemoryFigures>;

// The TransferCost of one pair of layouts.
struct TransferFigures {
  double time = 0, bytes = 0, energy = 0;
  double message = 0;   // repartitions: largest message of a rank, bytes
  double messages = 0;  // repartitions: most messages one rank sends and receives
  // Repartitions from or to an uneven layout: each rank's part (TransferCost::rank_moves);
  // null otherwise.
  std::shared_ptr<const std::vector<RankMove>> ranks;
  TransferFigures() = default;
  explicit TransferFigures(const TransferCost& c)
      : time(c.time_s),
        bytes(c.bytes),
        energy(c.energy_j),
        message(c.max_message_bytes),
        messages(c.max_rank_messages),
        ranks(c.rank_moves.empty() ? nullptr
                                   : std::make_shared<const std::vector<RankMove>>(c.rank_moves)) {}
};
using TransferSlot = CostSlot<TransferFigures>;

// Writes `f` into a share's slot once, under `mutex` (another run may have written the same
// figures first); returns the slot.
template <typename Figures>
const CostSlot<Figures>& publish(std::mutex& mutex, CostSlot<Figures>& slot, const Figures& f) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!slot.gen.load(std::memory_order_relaxed)) {
    static_cast<Figures&>(slot) = f;
    slot.gen.store(1, std::memory_order_release);
  }
  return slot;
}

// The action mask's memory-fit tables (plan_pricer_mask.cpp): for each group of catalog
// entries, their own memory term sorted, and the mask rows admitting the first n of them.
struct MaskTable {
  std::vector<double> values;
  std::vector<uint8_t> prefix;  // (values.size() + 1) rows of catalog-size bytes
};
// 0/1: attention entries without / with recompute (own state + activations); 2/3: MLP
// entries after an attention without / with recompute.
using MaskTables = std::array<MaskTable, 4>;

// The figures of the catalog's entries under one set of conditions and pipeline (but for its
// split): the stages' cost models, rows [2·stage + kind] of one slot per entry, the mask
// tables.
struct PriceRows {
  PriceRows(std::vector<CostModel> stage_models, size_t entries)
      : stages(std::move(stage_models)),
        block(new BlockSlot[2 * stages.size() * entries]),
        memory(new MemorySlot[2 * stages.size() * entries]) {}
  const std::vector<CostModel> stages;  // per stage, under these conditions
  std::unique_ptr<BlockSlot[]> block;
  std::unique_ptr<MemorySlot[]> memory;
  std::mutex mutex;                               // publishes the slots and the mask tables
  std::atomic<const MaskTables*> masks{nullptr};  // set once, with release
  std::unique_ptr<const MaskTables> masks_held;
};

// The transfers of the catalog's layouts under one micro-batch shape, links and pipeline shape:
// redistribution per stage over `act` activation layouts, repartition per (stage, kind) over
// `param` parameter layouts, each row-major by (from, to) layout id.
struct TransferTables {
  TransferTables(int stages, int act, int param)
      : redist(new TransferSlot[size_t(stages) * act * act]),
        repart(new TransferSlot[size_t(2 * stages) * param * param]) {}
  std::unique_ptr<TransferSlot[]> redist, repart;
  std::mutex mutex;  // publishes the slots
};

class SimCostShare {
 public:
  // What a run is built from, for the check of the runs that join after the first.
  struct Origin {
    int blocks = 0, world = 0;
    std::string model;
    std::vector<Strategy> catalog;
    std::vector<ScenarioEvent> events;
    std::vector<uint32_t> act_keys;  // the catalog's layouts, in id order
    std::vector<uint64_t> param_keys;
    std::vector<double> probe;  // cost_probe() under step 0's conditions
  };
  // Keeps the first run's origin; throws std::invalid_argument naming what differs for a
  // later one that does not match it.
  void admit(Origin origin);

  // The rows of `key` (what the stages' cost models are made of), or null.
  std::shared_ptr<PriceRows> find_rows(const std::vector<double>& key);
  // Adds `made` under `key` unless another run added rows there first; returns the rows kept.
  // Past kMaxRows sets the index starts over (the runs keep the rows they hold).
  std::shared_ptr<PriceRows> add_rows(std::vector<double> key, std::shared_ptr<PriceRows> made);
  static constexpr size_t kMaxRows = 1024;

  // The transfer tables of `key` (what moving activations and state depends on: stages, the
  // micro-batch's shape, m, schedule, virtual stages, the links), made for `stages` stages
  // over `act` and `param` layouts where none is yet. They live as long as the share.
  TransferTables& transfers(std::vector<double> key, int stages, int act, int param);

 private:
  std::mutex mutex_;  // the indexes and the origin
  bool joined_ = false;
  Origin origin_;
  std::map<std::vector<double>, std::shared_ptr<PriceRows>> rows_;
  std::map<std::vector<double>, std::unique_ptr<TransferTables>> transfers_;
};

std::shared_ptr<SimCostShare> new_sim_cost_share();

// A few figures of a cost model under step 0's conditions that the devices, links,
// calibration and cost terms all enter (the LM head; of each kind a data-parallel block and
// the catalog's last entry valid for it, whose collectives cross the links).
std::vector<double> cost_probe(const CostModel& cost, const std::vector<Strategy>& catalog,
                               int world);

}  // namespace shardgym
