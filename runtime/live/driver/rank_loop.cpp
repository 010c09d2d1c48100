// serve_rank: the command loop every rank runs (driver/rank_protocol.h), and fault injection.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "datasets/text/corpus.h"
#include "runtime/core/plan.h"
#include "runtime/live/comm/device.h"
#include "runtime/live/comm/gloo.h"
#include "runtime/live/driver/meters.h"
#include "runtime/live/driver/rank_protocol.h"
#include "runtime/live/launch/group_sets.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/rank_trainer.h"

namespace shardgym::live {

FaultSpec parse_fault(const std::string& text) {
  FaultSpec f;
  if (text.empty()) return f;
  const size_t at = text.find('@'), colon = text.find(':');
  try {
    if (at == std::string::npos) throw 0;
    f.kind = text.substr(0, at);
    size_t used = 0;
    if (f.kind == "nostart") {
      f.rank = std::stoi(text.substr(at + 1), &used);
      if (used != text.size() - at - 1) throw 0;
    } else {
      if (colon == std::string::npos || colon < at) throw 0;
      f.rank = std::stoi(text.substr(at + 1, colon - at - 1), &used);
      if (used != colon - at - 1) throw 0;
      f.step = std::stoi(text.substr(colon + 1), &used);
      if (used != text.size() - colon - 1) throw 0;
      if (f.kind != "throw" && f.kind != "stall" && f.kind != "exit") throw 0;
    }
    if (f.rank < 0) throw 0;
  } catch (...) {
    throw std::invalid_argument("fault '" + text +
                                "': expected <throw|stall|exit>@<rank>:<step> or nostart@<rank>, "
                                "e.g. throw@2:3");
  }
  return f;
}

// ---- the rank loop ----

namespace {

std::string message_of(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

// The injected fault, if it is this rank's turn. A stall neither replies nor fails: the rank
// just stops taking part in command `seq` until the driver abandons it (never, in a process).
void maybe_fault(const FaultSpec& f, int rank, int step, RankChannel& channel, int seq) {
  if (f.kind.empty() || f.rank != rank || f.step != step) return;
  if (f.kind == "throw")
    throw std::runtime_error("injected fault (throw) at step " + std::to_string(step));
  if (f.kind == "stall") {
    while (!channel.abandoned(seq)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    throw RankAborted("injected fault (stall) at step " + std::to_string(step) +
                      ", left when the driver gave the run up");
  }
  if (f.kind == "exit") std::_Exit(3);
}

// The median of `reps` timed calls of `call`, after one warm-up call and `sync` (a barrier of
// the ranks taking part).
template <class Call, class Sync>
double median_seconds(const Call& call, const Sync& sync, int reps) {
  call();
  sync();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const Stopwatch sw;
    call();
    times.push_back(sw.elapsed_s());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Calibration's microbenchmarks: on every standard group of two or more ranks, in the order of
// `sets` (every rank walks the same list, so the members of a group meet in the same order),
// an all-reduce, an all-gather and a reduce-scatter of `bytes` per rank (float32), one
// warm-up call and `reps` timed ones after a barrier. Disjoint groups run at the same time, as
// a tensor-parallel layer's do. Then each stage boundary of rank_protocol.h's
// timed_stage_sizes, its two stages' ranks alone (the others wait at the world's barrier
// before the next). Returns this rank's median seconds per (group, op), then per boundary,
// NaN where it takes no part.
std::vector<double> time_collectives(CommWorld& world, const std::vector<std::vector<int>>& sets,
                                     int64_t bytes, int reps, const c10::Device& device) {
  if (bytes < 4 || reps < 1)
    throw std::invalid_argument("collectives: need at least 4 bytes and 1 repetition");
  constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  std::vector<double> out;
  for (const auto& set : sets) {
    if (set.size() < 2) continue;
    const bool member = std::binary_search(set.begin(), set.end(), world.rank());
    for (const std::string op : kTimedCollectives) {
      if (!member) {
        out.push_back(kAbsent);
        continue;
      }
      Comm& comm = world.group(set);
      const int64_t n = comm.size();
      const int64_t elems = std::max<int64_t>(n, bytes / 4 / n * n);
      at::Tensor t = at::ones({elems}, opts);
      auto call = [&] {
        if (op == "all_reduce") comm.all_reduce(t);
        if (op == "all_gather") (void)comm.all_gather(t, 0);
        if (op == "reduce_scatter") (void)comm.reduce_scatter(t, 0);
        synchronize(device);
      };
      out.push_back(median_seconds(call, [&] { comm.barrier(); }, reps));
    }
  }
  Comm& all = world.world();
  const int r = world.rank();
  for (const int s : timed_stage_sizes(world.world_size())) {
    all.barrier();
    if (r >= 2 * s) {
      out.push_back(kAbsent);
      continue;
    }
    const int peer = r < s ? r + s : r - s;
    at::Tensor send = at::ones({std::max<int64_t>(1, bytes / 4)}, opts);
    at::Tensor recv = at::empty_like(send);
    auto call = [&] {
      std::vector<Comm::P2POp> ops{{true, send, peer}, {false, recv, peer}};
      all.batch_p2p(ops);
      synchronize(device);
    };
    // The warm-up exchange has met the counterpart: the pair starts together.
    out.push_back(median_seconds(call, [] {}, reps));
  }
  return out;
}

at::Tensor to_tensor(const std::vector<int32_t>& v, int rows, int cols) {
  return at::from_blob(const_cast<int32_t*>(v.data()), {rows, cols}, at::kInt).to(at::kLong);
}

// Every group a strategy can use, created once now in one canonical order: repartitions
// later only look groups up, they never rendezvous. (The loop of create_standard_groups, with
// a progress mark before each rendezvous.)
void create_groups(CommWorld& world, const std::vector<std::vector<int>>& sets,
                   RankChannel& channel) {
  const int rank = world.rank();
  for (size_t i = 0; i < sets.size(); ++i) {
    if (!std::binary_search(sets[i].begin(), sets[i].end(), rank)) continue;
    // Singletons need no rendezvous; the world group exists since the world was made.
    if (sets[i].size() > 1 && static_cast<int>(sets[i].size()) < world.world_size()) {
      channel.progress(ProgressMark::group(static_cast<int>(i), format_ranks(sets[i])));
    }
    world.group(sets[i]);
  }
}

std::unique_ptr<RankTrainer> make_trainer(const LiveRankConfig& config, const RankCommand& cmd,
                                          CommWorld& world, const c10::Device& device) {
  const ModelSpec& model = config.model;
  TrainerOptions opts;
  opts.seed = cmd.seed;
  opts.dtype = model.dtype == DType::kFloat64 ? at::kDouble : at::kFloat;
  opts.lr = config.lr;
  opts.weight_decay = config.weight_decay;
  opts.clip = config.clip;
  opts.threads = config.threads;
  opts.device = device;
  return std::make_unique<RankTrainer>(model, Plan::parse(cmd.plan, model.num_blocks()), world,
                                       opts);
}

// Moves the trainer to `next` where it differs, with the repartition's time, bytes and the
// memory it held in transit in `rep` (from the rank's MemoryMeter slot `meter` on a CPU).
void repartition_to(RankTrainer& trainer, const Plan& next, const c10::Device& device, int meter,
                    RankReport& rep) {
  if (next == trainer.plan()) return;
  // The peak above what the rank held before: the command's peak was reset to the current
  // figure when it began, and nothing was allocated since.
  const int64_t held =
      device.is_cuda() ? cuda_allocated_bytes(device.index()) : MemoryMeter::current_bytes(meter);
  const RepartitionStats rs = trainer.repartition(next);
  rep.repartition_peak_bytes =
      static_cast<double>((device.is_cuda() ? cuda_peak_allocated_bytes(device.index())
                                            : MemoryMeter::peak_bytes(meter)) -
                          held);
  rep.repartition_s = rs.seconds;
  rep.repartition_bytes = rs.bytes_received;
  rep.blocks_changed = rs.blocks_changed;
}

// One training iteration on batch `b`, its loss and times in `rep`.
void train_step(RankTrainer& trainer, const text::TokenBatch& b, const RankCommand& cmd, int rank,
                RankReport& rep) {
  const at::Tensor tokens = to_tensor(b.tokens, b.batch, b.seq);
  const at::Tensor targets = to_tensor(b.targets, b.batch, b.seq);
  BlockTimes times;
  trainer.set_compute_stretch(rank < static_cast<int>(cmd.slowdown.size()) ? cmd.slowdown[rank]
                                                                           : 1.0);
  const Stopwatch sw;
  rep.loss = trainer.train_step(tokens, targets, &times, cmd.micro_batches);
  rep.step_s = sw.elapsed_s();
  rep.fwd_s = times.fwd_s;
  rep.bwd_s = times.bwd_s;
  rep.comm_s = times.comm_s;
  rep.optimizer_s = times.optimizer_s;
}

}  // namespace

void serve_rank(CommWorld& world, const LiveRankConfig& config, RankChannel& channel,
                int meter_base) {
  const int rank = world.rank(), meter = meter_base + rank;
  MemoryMeter::install();
  MemoryMeter::Scope memory_scope(meter);
  const ModelSpec& model = config.model;
  const int global_batch =
      model.global_batch > 0 ? model.global_batch : model.micro_batch * world.world_size();
  text::TextCorpus corpus = config.corpus.empty() ? text::TextCorpus::load_default()
                                                  : text::TextCorpus::load({config.corpus});
  const auto sets = standard_group_sets(world.world_size());
  create_groups(world, sets, channel);
  const FaultSpec fault = parse_fault(config.fault);
  const c10::Device device =
      config.device == "cuda"
          ? c10::Device(c10::kCUDA,
                        static_cast<c10::DeviceIndex>(local_cuda_index(world.local_rank())))
          : c10::Device(c10::kCPU);
  std::unique_ptr<RankTrainer> trainer;
  std::unique_ptr<text::BatchSampler> sampler;
  int last = 0;
  int steps = 0;  // training iterations since the last reset
  for (;;) {
    const RankCommand cmd = channel.next(last);
    last = cmd.seq;
    if (cmd.op == RankOp::kStop) return;
    // A peer failed and the driver gave up the run: this rank may never have seen the command
    // that failed (the mailbox holds the latest command only), so its peers are gone; failing
    // here skips the launcher's closing barrier, which would wait out the timeout for them.
    if (cmd.op == RankOp::kAbort) throw RankAborted("stopped after another rank failed");
    RankReport rep;
    rep.seq = cmd.seq;
    rep.rank = rank;
    const double cpu0 = thread_cpu_now_s();
    MemoryMeter::reset_peak(meter);
    if (device.is_cuda()) cuda_reset_peak(device.index());
    try {
      if (cmd.op == RankOp::kReset) {
        trainer.reset();
        trainer = make_trainer(config, cmd, world, device);
        // Every rank draws the same global batches; each block takes its replica's rows.
        sampler = std::make_unique<text::BatchSampler>(corpus, text::Split::kTrain, global_batch,
                                                       model.seq, cmd.seed ^ 0x5eedda7aull);
        steps = 0;
      } else if (cmd.op == RankOp::kCollectives) {
        rep.comm_s = time_collectives(world, sets, cmd.bytes, cmd.reps, device);
      } else if (!trainer) {
        throw std::logic_error("rank received a command before reset");
      } else if (cmd.op == RankOp::kStep) {
        repartition_to(*trainer, Plan::parse(cmd.plan, model.num_blocks()), device, meter, rep);
        maybe_fault(fault, rank, steps++, channel, cmd.seq);
        train_step(*trainer, sampler->next(), cmd, rank, rep);
      } else {
        const text::TokenBatch b = text::sequential_batch(corpus, text::Split::kValidation,
                                                          global_batch, model.seq, cmd.eval_index);
        rep.loss = trainer->eval_loss(to_tensor(b.tokens, b.batch, b.seq),
                                      to_tensor(b.targets, b.batch, b.seq));
      }
    } catch (const RankAborted&) {
      throw;  // a stalled rank leaves without answering: the driver names it from that
    } catch (const std::exception& e) {
      rep.ok = false;
      rep.error = op_name(cmd.op) + std::string(" (command ") + std::to_string(cmd.seq) +
                  "): " + message_of(e);
      channel.reply(rep);
      trainer.reset();
      throw std::runtime_error(rep.error);
    }
    rep.busy_s = thread_cpu_now_s() - cpu0;
    rep.peak_bytes =
        static_cast<double>(device.is_cuda() ? cuda_peak_allocated_bytes(device.index())
                                             : MemoryMeter::peak_bytes(meter));
    channel.reply(rep);
  }
}

}  // namespace shardgym::live
