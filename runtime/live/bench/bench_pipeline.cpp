#include "runtime/live/bench/bench_pipeline.h"

#include <algorithm>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>

#include "runtime/core/plan.h"
#include "runtime/live/bench/bench_live.h"
#include "runtime/live/bench/bench_python.h"
#include "runtime/live/driver/meters.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/tp/rank_trainer.h"

namespace shardgym::live {
namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

BenchPipelineRow measure(const BenchPipelineOptions& o, const std::string& schedule, int m) {
  const int P = o.ranks, blocks = o.model.num_blocks();
  const Plan plan = Plan::parse("uniform:dp@pp(p=" + std::to_string(P) + ",m=" +
                                    std::to_string(m) + ",schedule=" + schedule + ")",
                                blocks);
  const int64_t G = o.model.global_batch;
  // Per timed iteration: the slowest rank's step and optimizer, each stage's compute.
  std::vector<std::vector<double>> step(o.iters, std::vector<double>(P)),
      opt(o.iters, std::vector<double>(P)), compute(o.iters, std::vector<double>(P));
  std::mutex mu;
  run_threads(P, [&](CommWorld& world) {
    TrainerOptions t;
    t.dtype = o.model.dtype == DType::kFloat64 ? at::kDouble : at::kFloat;
    t.threads = 1;
    RankTrainer trainer(o.model, plan, world, t);
    at::Generator gen = at::detail::createCPUGenerator(7);
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      const at::Tensor tokens = at::randint(0, o.model.vocab, {G, o.model.seq}, gen, at::kLong);
      const at::Tensor targets = at::randint(0, o.model.vocab, {G, o.model.seq}, gen, at::kLong);
      BlockTimes times;
      const Stopwatch sw;
      trainer.train_step(tokens, targets, &times, m);
      const double s = sw.elapsed_s();
      if (it < o.warmup) continue;
      double c = 0;
      for (int b = 0; b < blocks; ++b) c += times.fwd_s[b] + times.bwd_s[b];
      std::lock_guard<std::mutex> lock(mu);
      const int k = it - o.warmup, r = world.rank();
      step[k][r] = s, opt[k][r] = times.optimizer_s, compute[k][r] = c / m;
    }
  }, /*timeout_s=*/120);
  BenchPipelineRow row;
  row.schedule = schedule;
  row.micro_batches = m;
  std::vector<double> steps, opts, stage, bubbles;
  for (int k = 0; k < o.iters; ++k) {
    const double s = *std::max_element(step[k].begin(), step[k].end());
    const double op = *std::max_element(opt[k].begin(), opt[k].end());
    const double c = *std::max_element(compute[k].begin(), compute[k].end());
    steps.push_back(s), opts.push_back(op), stage.push_back(c);
    bubbles.push_back(s - op > 0 ? 1 - m * c / (s - op) : 0);
  }
  row.steps = steps;
  row.step_s = median_of(steps);
  row.optimizer_s = median_of(opts);
  row.stage_compute_s = median_of(stage);
  row.bubble = median_of(bubbles);
  row.formula = double(P - 1) / double(m + P - 1);
  const auto [lo, hi] = std::minmax_element(steps.begin(), steps.end());
  row.spread = row.step_s > 0 ? (*hi - *lo) / row.step_s : 0;
  return row;
}

// The eager pipeline's median step (bench_pipeline_eager.py); throws std::runtime_error.
double time_eager(const BenchPipelineOptions& o, const std::string& schedule, int m) {
  const ModelSpec& md = o.model;
  std::ostringstream cmd;
  cmd << o.python << " '" << bench_source_dir() << "/runtime/live/bench/bench_pipeline_eager.py'"
      << " --ranks " << o.ranks << " --micro-batches " << m << " --schedule " << schedule
      << " --layers " << md.layers << " --hidden " << md.hidden << " --heads " << md.heads
      << " --seq " << md.seq << " --batch " << md.global_batch << " --vocab " << md.vocab
      << " --warmup " << o.warmup << " --iters " << o.iters << " --gemm onednn 2>&1";
  const std::string out = run_python_json(cmd.str(), "{\"step_s\": [");
  std::vector<double> steps = json_list(out, "step_s", out.rfind("{\"step_s\": ["));
  return median_of(steps);
}

}  // namespace

BenchPipelineOptions::BenchPipelineOptions() : model(BenchLiveOptions::bench_live_model()) {}

BenchPipelineResult bench_pipeline(const BenchPipelineOptions& o) {
  if (o.ranks < 2 || o.ranks > o.model.layers)
    throw std::invalid_argument("bench pipeline: --ranks " + std::to_string(o.ranks) +
                                " must lie in [2, " + std::to_string(o.model.layers) +
                                "] (one stage per rank, at least one layer per stage)");
  if (o.iters < 1 || o.warmup < 0)
    throw std::invalid_argument("bench pipeline: --iters must be ≥ 1 and --warmup ≥ 0");
  BenchPipelineResult r;
  r.ranks = o.ranks;
  r.cores = std::thread::hardware_concurrency();
  std::ostringstream model;
  model << o.model.layers << " layers, hidden " << o.model.hidden << ", seq " << o.model.seq
        << ", global batch " << o.model.global_batch;
  r.model = model.str();
  for (const std::string& s : o.schedules)
    for (int m : o.micro_batches) {
      if (m < 1 || o.model.global_batch % m != 0)
        throw std::invalid_argument("bench pipeline: m = " + std::to_string(m) +
                                    " does not divide the global batch of " +
                                    std::to_string(o.model.global_batch));
      r.rows.push_back(measure(o, s, m));
      if (o.run_python && r.python_error.empty()) {
        try {
          r.rows.back().eager_step_s = time_eager(o, s, m);
        } catch (const std::runtime_error& e) {
          r.python_error = e.what();
        }
      }
    }
  return r;
}

std::string bench_pipeline_to_text(const BenchPipelineResult& r) {
  std::ostringstream o;
  o << "pipeline bubble on " << r.ranks << " rank threads, one stage each (" << r.model
    << "), " << r.cores << " cores\n";
  if (r.cores > 0 && static_cast<unsigned>(r.ranks) > r.cores)
    o << "warning: more ranks than cores: stages wait for a core, not only for their "
         "neighbour; the bubble measured says little about the schedule\n";
  o << "\nschedule   m    step ms   optim ms   stage c ms   bubble   (p-1)/(m+p-1)   spread"
       "   eager ms   C++/eager\n";
  for (const BenchPipelineRow& w : r.rows) {
    o << std::left << std::setw(8) << w.schedule << std::right << std::setw(4) << w.micro_batches
      << std::fixed << std::setprecision(2) << std::setw(11) << w.step_s * 1e3 << std::setw(11)
      << w.optimizer_s * 1e3 << std::setw(13) << w.stage_compute_s * 1e3 << std::setprecision(3)
      << std::setw(9) << w.bubble << std::setw(16) << w.formula << std::setprecision(1)
      << std::setw(8) << 100 * w.spread << "%";
    if (w.eager_step_s > 0)
      o << std::setprecision(2) << std::setw(11) << w.eager_step_s * 1e3 << std::setprecision(3)
        << std::setw(12) << w.step_s / w.eager_step_s;
    o << "\n";
  }
  o << "\nbubble: 1 - m * (slowest stage's compute per micro-batch) / (step - optimizer); the\n"
       "formula assumes equal stages and free transfers (docs/benchmarks.md); eager: the same\n"
       "pipeline in Python PyTorch (bench_pipeline_eager.py, oneDNN products, processes)\n";
  if (!r.python_error.empty()) o << "eager side not run: " << r.python_error << "\n";
  return o.str();
}

std::string bench_pipeline_to_json(const BenchPipelineResult& r) {
  std::ostringstream o;
  o << std::setprecision(9) << "{\"ranks\": " << r.ranks << ", \"cores\": " << r.cores
    << ", \"model\": \"" << r.model << "\", \"rows\": [";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const BenchPipelineRow& w = r.rows[i];
    o << (i ? ", " : "") << "{\"schedule\": \"" << w.schedule << "\", \"m\": " << w.micro_batches
      << ", \"step_s\": " << w.step_s << ", \"optimizer_s\": " << w.optimizer_s
      << ", \"stage_compute_s\": " << w.stage_compute_s << ", \"bubble\": " << w.bubble
      << ", \"formula\": " << w.formula << ", \"spread\": " << w.spread
      << ", \"eager_step_s\": " << w.eager_step_s << "}";
  }
  o << "]}";
  return o.str();
}

}  // namespace shardgym::live
