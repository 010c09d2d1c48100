#include "experiments/bench.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <stdexcept>

#include "env/partition_env.h"
#include "env/registry.h"
#include "experiments/config.h"

namespace shardgym {
namespace {

// The benchmark workload as a config, so it is checked like any other. Figures as in
// experiments/hardware.yaml (NVIDIA H100 SXM5 datasheet; ConnectX-7 NDR400 per GPU).
constexpr const char* kBenchYaml = R"(
name: bench-sim
env: shardgym/TPSim-v0
model: {name: gpt-32l, layers: 32, hidden: 4096, heads: 32, seq: 2048, micro_batch: 64,
        global_batch: 64, dtype: bf16}
cluster:
  devices:
    - {name: H100-SXM5-80GB, peak_tflops: 989, memory_gib: 80, memory_bw_gbs: 3350,
       idle_w: 70, busy_w: 700}
  links:
    - {name: nvswitch-h100, bandwidth_gbs: 450, latency_us: 3, energy_pj_per_byte: 10}
    - {name: ib-ndr400, bandwidth_gbs: 50, latency_us: 5, energy_pj_per_byte: 60}
  nodes: [{count: 8, device: H100-SXM5-80GB, gpus: 8, intra_link: nvswitch-h100}]
  inter_link: ib-ndr400
reward: {normalize: false}
agent: {id: random}
steps_per_episode: 1000000000
)";

using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Steps `next(i)` until `seconds` have passed, reading the clock every 256 steps.
template <typename StepFn>
BenchPhase timed(double seconds, StepFn&& next) {
  BenchPhase phase;
  const double cpu_start = thread_cpu_seconds();
  const auto start = Clock::now();
  const auto limit = std::chrono::duration<double>(seconds);
  while (true) {
    for (int i = 0; i < 256; ++i) next(phase.steps++);
    const auto elapsed = Clock::now() - start;
    if (elapsed >= limit) {
      phase.seconds = std::chrono::duration<double>(elapsed).count();
      phase.cpu_seconds = thread_cpu_seconds() - cpu_start;
      return phase;
    }
  }
}

}  // namespace

ExperimentSpec bench_sim_spec() { return parse_experiment(kBenchYaml, "<bench sim>"); }

BenchResult bench_sim(const BenchOptions& options) {
  if (!(options.seconds > 0)) throw std::invalid_argument("bench: --seconds must be > 0");
  if (options.pool_size < 1) throw std::invalid_argument("bench: pool size must be >= 1");
  const ExperimentSpec spec = bench_sim_spec();
  std::unique_ptr<Env> env = make_bare_env(spec.env_id, spec);
  BenchResult result;
  result.env_id = spec.env_id;
  result.num_blocks = env->spec().num_blocks;
  result.catalog_size = env->spec().catalog_size;
  result.world = spec.cluster.world_size();
  result.workload = "GPT " + std::to_string(spec.model.layers) + " layers (" +
                    std::to_string(result.num_blocks) + " blocks, hidden " +
                    std::to_string(spec.model.hidden) + "), " + std::to_string(result.world) +
                    " simulated GPUs (8 nodes x 8), catalog of " +
                    std::to_string(result.catalog_size) + " strategies";

  // Record the pool untimed: from the reset plan, each action changes 1–3 blocks to entries
  // the current mask allows. A step that ends the episode (e.g. several changed blocks that
  // fit one by one but not together) is followed by a reset, replayed identically below.
  const int blocks = result.num_blocks, k = result.catalog_size;
  std::mt19937_64 rng(options.seed);
  std::vector<Action> pool;
  std::vector<uint8_t> reset_after;
  const auto* penv = dynamic_cast<const PartitionEnv*>(env.get());
  if (!penv) throw std::logic_error("bench: " + spec.env_id + " is not a PartitionEnv");
  env->reset(options.seed);
  const Action initial = penv->action_from_plan(env->run().plan());
  Action current = initial;
  for (int i = 0; i < options.pool_size; ++i) {
    const std::vector<uint8_t> mask = env->action_mask();
    Action a = current;
    const int changes = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < changes; ++c) {
      const int b = static_cast<int>(rng() % blocks);
      std::vector<int> allowed;
      for (int j = 0; j < k; ++j) {
        if (mask[static_cast<size_t>(b) * k + j]) allowed.push_back(j);
      }
      if (!allowed.empty()) a[b] = allowed[rng() % allowed.size()];
    }
    StepResult r = env->step(a);
    pool.push_back(a);
    const bool ended = r.terminated || r.truncated;
    reset_after.push_back(ended);
    result.pool_episode_ends += ended ? 1 : 0;
    if (ended) {
      env->reset(options.seed);
      current = initial;
    } else {
      current = a;
    }
  }

  result.pool_size = static_cast<int>(pool.size());

  // Timed replay of the pool (a reset at the end of the pool brings the env back to the
  // state the pool was recorded from, so every action stays valid).
  env->reset(options.seed);
  const size_t n = pool.size();
  result.changing = timed(options.seconds, [&](int64_t step) {
    const size_t i = static_cast<size_t>(step) % n;
    env->step(pool[i]);
    if (reset_after[i] || i + 1 == n) env->reset(options.seed);
  });

  env->reset(options.seed);
  result.same_plan = timed(options.seconds, [&](int64_t) { env->step(initial); });
  return result;
}

std::string bench_to_json(const BenchResult& r) {
  std::ostringstream os;
  os.precision(10);
  auto phase = [&](const char* name, const BenchPhase& p) {
    os << "  \"" << name << "\": {\"steps\": " << p.steps << ", \"seconds\": " << p.seconds
       << ", \"cpu_seconds\": " << p.cpu_seconds << ", \"steps_per_s\": " << p.steps_per_s()
       << ", \"steps_per_cpu_s\": " << p.steps_per_cpu_s()
       << ", \"ratio_to_target\": " << p.steps_per_s() / r.target_steps_per_s << "}";
  };
  os << "{\n  \"env_id\": \"" << r.env_id << "\",\n  \"workload\": \"" << r.workload
     << "\",\n  \"num_blocks\": " << r.num_blocks << ",\n  \"catalog_size\": " << r.catalog_size
     << ",\n  \"world\": " << r.world << ",\n  \"pool_size\": " << r.pool_size
     << ",\n  \"pool_episode_ends\": " << r.pool_episode_ends
     << ",\n  \"target_steps_per_s\": " << r.target_steps_per_s << ",\n";
  phase("changing_plans", r.changing);
  os << ",\n";
  phase("same_plan", r.same_plan);
  os << "\n}\n";
  return os.str();
}

std::string bench_to_text(const BenchResult& r) {
  char buf[512];
  std::ostringstream os;
  os << "bench sim: " << r.env_id << ", single thread, bare env (no wrappers, no trace)\n"
     << "workload:  " << r.workload << "\n"
     << "actions:   pool of " << r.pool_size << " recorded before timing (1-3 blocks change per "
     << "step; " << r.pool_episode_ends << " ended the episode and are followed by a reset)\n";
  auto phase = [&](const char* name, const BenchPhase& p) {
    std::snprintf(
        buf, sizeof buf,
        "%-16s %9.0f steps/s wall (%.3fx of %.0f), %9.0f steps/s CPU (%.3fx); %lld steps, "
        "%.2f s wall, %.2f s CPU\n",
        name, p.steps_per_s(), p.steps_per_s() / r.target_steps_per_s, r.target_steps_per_s,
        p.steps_per_cpu_s(), p.steps_per_cpu_s() / r.target_steps_per_s,
        static_cast<long long>(p.steps), p.seconds, p.cpu_seconds);
    os << buf;
  };
  phase("changing plans:", r.changing);
  phase("same plan:", r.same_plan);
  return os.str();
}

}  // namespace shardgym
