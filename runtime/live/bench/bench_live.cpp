#include "runtime/live/bench/bench_live.h"
#include "runtime/live/bench/bench_python.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>

#include "runtime/core/plan.h"
#include "runtime/live/comm/device.h"
#include "runtime/live/launch/thread_ranks.h"
#include "runtime/live/driver/meters.h"
#include "runtime/live/tp/gemm.h"
#include "runtime/live/tp/rank_trainer.h"

namespace shardgym::live {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int64_t batch_of(const ModelSpec& m) { return m.global_batch > 0 ? m.global_batch : m.micro_batch; }

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// oneDNN products on or off (LibTorch's switch, read by gemm.h) for one scope.
class OneDnnSwitch {
 public:
  explicit OneDnnSwitch(bool on) : before_(at::globalContext().userEnabledMkldnn()) {
    at::globalContext().setUserEnabledMkldnn(on);
  }
  ~OneDnnSwitch() { at::globalContext().setUserEnabledMkldnn(before_); }
  OneDnnSwitch(const OneDnnSwitch&) = delete;
  OneDnnSwitch& operator=(const OneDnnSwitch&) = delete;

 private:
  bool before_;
};

void time_cpp(const BenchLiveOptions& o, std::vector<double>* times, std::vector<double>* cpu) {
  run_threads(
      1,
      [&](CommWorld& world) {
        TrainerOptions opts;
        opts.dtype = o.model.dtype == DType::kFloat64 ? at::kDouble : at::kFloat;
        opts.threads = o.threads;
        if (o.device == "cuda") opts.device = c10::Device(c10::kCUDA, 0);
        RankTrainer trainer(o.model, Plan::uniform(Strategy::dp(), o.model.num_blocks()), world,
                            opts);
        at::Generator gen = at::detail::createCPUGenerator(1);
        for (int it = 0; it < o.warmup + o.iters; ++it) {
          const at::Tensor tokens =
              at::randint(0, 256, {batch_of(o.model), o.model.seq}, gen, at::kLong);
          const at::Tensor targets =
              at::randint(0, 256, {batch_of(o.model), o.model.seq}, gen, at::kLong);
          const Stopwatch sw;
          const double c0 = process_cpu_s();
          trainer.train_step(tokens, targets);  // returns after the GPU work: synchronous
          if (it >= o.warmup) {
            times->push_back(sw.elapsed_s());
            cpu->push_back(process_cpu_s() - c0);
          }
        }
      },
      /*timeout_s=*/600);
}

// Runs the Python script and reads its JSON line; throws std::runtime_error with the reason.
struct PythonTimes {
  std::vector<double> step_s, cpu_s;
  std::string torch;
};

PythonTimes time_python(const BenchLiveOptions& o, const std::string& gemm) {
  const std::string script =
      o.script.empty() ? bench_source_dir() + "/runtime/live/bench/bench_live_eager.py" : o.script;
  const ModelSpec& m = o.model;
  std::ostringstream cmd;
  cmd << o.python << " '" << script << "' --layers " << m.layers << " --hidden " << m.hidden
      << " --heads " << m.heads << " --ffn " << m.ffn_size() << " --seq " << m.seq << " --batch "
      << batch_of(m) << " --vocab " << m.vocab << " --threads " << o.threads << " --warmup "
      << o.warmup << " --iters " << o.iters << " --dtype "
      << (m.dtype == DType::kFloat64 ? "float64" : "float32") << " --gemm " << gemm
      << " --device " << o.device << " 2>&1";
  const std::string out = run_python_json(cmd.str(), "{\"step_s\": [");
  const size_t at = out.rfind("{\"step_s\": [");
  PythonTimes t;
  t.step_s = json_list(out, "step_s", at);
  t.cpu_s = json_list(out, "cpu_s", at);
  const size_t tv = out.find("\"torch\": \"", at);
  if (tv != std::string::npos) t.torch = out.substr(tv + 10, out.find('"', tv + 10) - tv - 10);
  const size_t gv = out.find("\"gemm\": \"", at);
  if (gv != std::string::npos && out.compare(gv + 9, gemm.size(), gemm) != 0) {
    throw std::runtime_error("'" + cmd.str() + "' did not use --gemm " + gemm + ": " + out);
  }
  return t;
}

void time_repartition(const BenchLiveOptions& o, BenchLiveResult* r) {
  const int p = o.repartition_ranks;
  const int blocks = o.model.num_blocks();
  const Plan from = Plan::parse(o.repartition_from, blocks);
  const Plan to = Plan::parse(o.repartition_to, blocks);
  std::mutex mu;
  run_threads(
      p,
      [&](CommWorld& world) {
        TrainerOptions opts;
        opts.dtype = o.model.dtype == DType::kFloat64 ? at::kDouble : at::kFloat;
        opts.threads = o.threads;
        RankTrainer trainer(o.model, from, world, opts);
        at::Generator gen = at::detail::createCPUGenerator(2);
        const at::Tensor tokens =
            at::randint(0, 256, {batch_of(o.model), o.model.seq}, gen, at::kLong);
        trainer.train_step(tokens, tokens);  // creates the AdamW moments that move too
        // The shards the plain all-gather moves: this rank's block parameters as held before,
        // three times (parameter, exp_avg, exp_avg_sq have the same shapes).
        std::vector<at::Tensor> shards;
        for (const auto& [name, t] : trainer.local_params()) {
          if (name.rfind("h.", 0) == 0) shards.push_back(t.detach().clone().flatten());
        }
        world.world().barrier();
        const RepartitionStats rs = trainer.repartition(to);
        world.world().barrier();
        const Stopwatch sw;
        double received = 0;
        for (int copy = 0; copy < 3; ++copy) {
          for (const at::Tensor& s : shards) {
            world.world().all_gather(s, 0);
            received += static_cast<double>((p - 1) * s.numel() * s.element_size());
          }
        }
        const double gather_s = sw.elapsed_s();
        std::lock_guard<std::mutex> lock(mu);
        r->repartition_bytes += rs.bytes_received;
        r->repartition_s = std::max(r->repartition_s, rs.seconds);
        r->allgather_bytes += received;
        r->allgather_s = std::max(r->allgather_s, gather_s);
      },
      /*timeout_s=*/600);
}

}  // namespace

ModelSpec BenchLiveOptions::bench_live_model() {
  ModelSpec m = ModelSpec::gpt(/*layers=*/4, /*hidden=*/128, /*heads=*/4, /*seq=*/64,
                               /*micro_batch=*/8, /*global_batch=*/8);
  m.name = "gpt-bench-live";
  m.vocab = 256;
  m.dtype = DType::kFloat32;
  m.mixed_precision = false;
  return m;
}

BenchLiveResult bench_live(const BenchLiveOptions& o) {
  if (o.iters < 1 || o.warmup < 0) throw std::invalid_argument("bench live: iters must be >= 1");
  const std::string problem = o.model.validate();
  if (!problem.empty()) throw std::invalid_argument("bench live: model: " + problem);
  BenchLiveResult r;
  std::ostringstream w;
  w << "gpt " << o.model.layers << " layers, h=" << o.model.hidden << ", heads=" << o.model.heads
    << ", seq=" << o.model.seq << ", batch=" << batch_of(o.model) << ", vocab=" << o.model.vocab
    << ", " << dtype_name(o.model.dtype);
  r.workload = w.str();
  r.device = o.device;
  r.threads = o.threads;
  const bool cuda = o.device == "cuda";
  if (cuda) {
    const std::string why = why_device_unusable("cuda", "gloo", 1, /*threads=*/true);
    if (!why.empty()) throw std::invalid_argument("bench live --device cuda: " + why);
  } else if (o.device != "cpu") {
    throw std::invalid_argument("bench live: device '" + o.device + "': expected cpu or cuda");
  }
  time_cpp(o, &r.cpp_step_s, &r.cpp_cpu_s);
  r.cpp_median_s = median(r.cpp_step_s);
  r.cpp_cpu_median_s = median(r.cpp_cpu_s);
  const bool fp32 = o.model.dtype == DType::kFloat32;
  r.cpp_gemm = fp32 && !cuda && onednn_gemm_available() ? "onednn" : "matmul";
  if (o.variants && r.cpp_gemm == "onednn") {
    const OneDnnSwitch off(false);
    std::vector<double> wall, cpu;
    time_cpp(o, &wall, &cpu);
    r.cpp_matmul_cpu_median_s = median(cpu);
  }
  if (o.run_python) {
    try {
      const PythonTimes t = time_python(o, "matmul");
      r.python_step_s = t.step_s;
      r.python_cpu_s = t.cpu_s;
      r.python_torch = t.torch;
      r.python_median_s = median(r.python_step_s);
      r.python_cpu_median_s = median(r.python_cpu_s);
      r.wall_ratio = r.python_median_s > 0 ? r.cpp_median_s / r.python_median_s : 0;
      r.ratio = cuda                        ? r.wall_ratio
                : r.python_cpu_median_s > 0 ? r.cpp_cpu_median_s / r.python_cpu_median_s
                                            : 0;
    } catch (const std::exception& e) {
      r.python_error = e.what();
    }
    if (o.variants && fp32 && !cuda && r.python_error.empty()) {
      try {
        r.python_onednn_cpu_median_s = median(time_python(o, "onednn").cpu_s);
        r.onednn_ratio = r.cpp_cpu_median_s / r.python_onednn_cpu_median_s;
      } catch (const std::exception& e) {
        r.python_onednn_error = e.what();
      }
    }
  } else {
    r.python_error = "not run";
  }
  r.repartition_from = o.repartition_from;
  r.repartition_to = o.repartition_to;
  if (o.repartition_ranks > 1) time_repartition(o, &r);
  return r;
}

std::string bench_live_to_text(const BenchLiveResult& r) {
  std::ostringstream s;
  s.precision(4);
  s << "bench live: " << r.workload << ", " << r.threads << " intra-op thread(s), device "
    << r.device << "\n";
  s << "  step time, 1 rank (median of " << r.cpp_step_s.size() << ")   wall      CPU\n";
  s << "    C++ live runtime (" << r.cpp_gemm << " products)  " << r.cpp_median_s * 1e3
    << " ms  " << r.cpp_cpu_median_s * 1e3 << " ms\n";
  if (r.python_error.empty()) {
    s << "    PyTorch eager (torch " << r.python_torch << ", torch.matmul)  "
      << r.python_median_s * 1e3 << " ms  " << r.python_cpu_median_s * 1e3 << " ms\n";
    s << "  ratio C++/Python: " << (r.device == "cuda" ? "wall (the figure on CUDA) " : "CPU ")
      << r.ratio << ", wall " << r.wall_ratio
      << (r.ratio <= 1.0 ? "  (target <= 1.0: met)\n" : "  (target <= 1.0: MISSED)\n");
  } else {
    s << "  PyTorch eager: no figure (" << r.python_error << ")\n";
  }
  if (r.cpp_matmul_cpu_median_s > 0 || r.python_onednn_cpu_median_s > 0 ||
      !r.python_onednn_error.empty()) {
    s << "  variants (CPU / step):";
    if (r.cpp_matmul_cpu_median_s > 0) {
      s << " C++ on at::matmul " << r.cpp_matmul_cpu_median_s * 1e3 << " ms;";
    }
    if (r.python_onednn_cpu_median_s > 0) {
      s << " eager with oneDNN products " << r.python_onednn_cpu_median_s * 1e3
        << " ms, ratio C++/that " << r.onednn_ratio;
    } else if (!r.python_onednn_error.empty()) {
      s << " eager with oneDNN products: no figure (" << r.python_onednn_error << ")";
    }
    s << "\n";
  }
  if (r.repartition_bytes > 0) {
    s << "  repartition " << r.repartition_from << " -> " << r.repartition_to << ": "
      << r.repartition_bytes << " B in " << r.repartition_s * 1e3
      << " ms = " << r.repartition_s_per_byte() * 1e9 << " ns/B\n";
    s << "  plain all-gather of the same shards: " << r.allgather_bytes << " B in "
      << r.allgather_s * 1e3 << " ms = " << r.allgather_s_per_byte() * 1e9 << " ns/B\n";
  }
  return s.str();
}

std::string bench_live_to_json(const BenchLiveResult& r) {
  auto list = [](const std::vector<double>& v) {
    std::ostringstream s;
    s.precision(9);
    s << '[';
    for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
    s << ']';
    return s.str();
  };
  auto quote = [](const std::string& t) {
    std::string o = "\"";
    for (char c : t) {
      if (c == '"' || c == '\\') o += '\\';
      if (c == '\n') {
        o += "\\n";
        continue;
      }
      o += c;
    }
    return o + "\"";
  };
  std::ostringstream s;
  s.precision(9);
  s << "{\"workload\": " << quote(r.workload) << ", \"threads\": " << r.threads
    << ", \"cpp_step_s\": " << list(r.cpp_step_s) << ", \"cpp_cpu_s\": " << list(r.cpp_cpu_s)
    << ", \"cpp_median_s\": " << r.cpp_median_s << ", \"cpp_cpu_median_s\": " << r.cpp_cpu_median_s
    << ", \"python_step_s\": " << list(r.python_step_s)
    << ", \"python_cpu_s\": " << list(r.python_cpu_s)
    << ", \"python_median_s\": " << r.python_median_s
    << ", \"python_cpu_median_s\": " << r.python_cpu_median_s << ", \"ratio\": " << r.ratio
    << ", \"wall_ratio\": " << r.wall_ratio << ", \"device\": " << quote(r.device)
    << ", \"python_error\": " << quote(r.python_error)
    << ", \"python_torch\": " << quote(r.python_torch) << ", \"cpp_gemm\": " << quote(r.cpp_gemm)
    << ", \"cpp_matmul_cpu_median_s\": " << r.cpp_matmul_cpu_median_s
    << ", \"python_onednn_cpu_median_s\": " << r.python_onednn_cpu_median_s
    << ", \"onednn_ratio\": " << r.onednn_ratio
    << ", \"python_onednn_error\": " << quote(r.python_onednn_error)
    << ", \"repartition_from\": " << quote(r.repartition_from)
    << ", \"repartition_to\": " << quote(r.repartition_to)
    << ", \"repartition_bytes\": " << r.repartition_bytes
    << ", \"repartition_s\": " << r.repartition_s << ", \"allgather_bytes\": " << r.allgather_bytes
    << ", \"allgather_s\": " << r.allgather_s << "}\n";
  return s.str();
}

}  // namespace shardgym::live
