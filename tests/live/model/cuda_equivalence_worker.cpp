// One rank process of cuda_equivalence_test: ranks that share one GPU must be processes (each
// process has its own autograd engine; rank threads would share the GPU's one backward thread
// and deadlock in a collective). Every rank puts its shards on cuda:0, the ranks talk over Gloo
// (staged through the host), and each case's loss and gathered gradients are compared with
// the single-rank reference on the CPU. Rank 0 prints one line per case and a summary line
// "max loss_err <x> grad_err <y> over <n> cases"; the exit status is 3 when an error exceeds
// the tolerance. argv[1]: float64 | float32; argv[2]: the suite, one of
//   gpt        every catalog strategy and 6 random mixtures of the tiny GPT (default);
//   llama      the same for Llama's blocks (tiny_llama), the mixtures with a tied LM head;
//   pipelines  pipelined plans of the 4-layer GPT, m = 1, 2, 4, 1F1B and GPipe, even and
//              uneven splits: P = 2 two stages; P = 4 tensor parallelism inside two stages and
//              data parallelism across, four stages, and the tied Llama over two stages.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "runtime/live/comm/device.h"
#include "runtime/live/launch/process_ranks.h"
#include "tests/live/model/equivalence_util.h"

namespace {

using namespace shardgym;
using namespace shardgym::live::testing;

struct Group {
  ModelSpec model;
  std::vector<Case> cases;
};

std::vector<Group> suite_groups(const std::string& suite, int p) {
  std::vector<Group> out;
  if (suite == "gpt" || suite == "llama") {
    ModelSpec m = suite == "gpt" ? tiny_model() : tiny_llama();
    out.push_back({m, uniform_cases(m, p)});
    if (suite == "llama") m = tiny_llama(/*tied=*/true);
    out.push_back({m, mixture_cases(m, p, 6, 500 + p)});
  } else if (suite == "pipelines") {
    const ModelSpec m = four_layers();
    const std::vector<std::string> two = {"pp(p=2)", "pp(p=2,schedule=gpipe)",
                                          "pp(p=2,split=1/3)", "pp(p=2,split=3/1,schedule=gpipe)"};
    Group g{m, {}};
    const std::vector<std::string> blocks =
        p == 2 ? std::vector<std::string>{"uniform:dp"}
               : std::vector<std::string>{"uniform:tp1d(t=2)", "uniform:tp1d(t=2,sp=1)",
                                          "dp;tp1d(t=2);tp2d(d1=1,d2=2,first=row);"
                                          "tp1d(t=2,sp=1,recompute=1);tp1d(t=2,chunks=2);dp;"
                                          "tp2d(d1=2,d2=1,first=col);tp1d(t=2)"};
    for (const std::string& b : blocks)
      for (Case& c : pipelined_cases(m, b, two)) g.cases.push_back(std::move(c));
    if (p == 4)
      for (Case& c : pipelined_cases(m, "uniform:dp", {"pp(p=4)", "pp(p=4,schedule=gpipe)"}))
        g.cases.push_back(std::move(c));
    out.push_back(std::move(g));
    if (p == 4) {
      const ModelSpec llama = four_layers(tiny_llama(/*tied=*/true));
      out.push_back({llama, pipelined_cases(llama, "uniform:tp1d(t=2)", {"pp(p=2,split=3/1)"})});
    }
  } else {
    throw std::invalid_argument("unknown suite '" + suite + "' (gpt, llama, pipelines)");
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shardgym::live;
  const bool f64 = argc < 2 || std::string(argv[1]) == "float64";
  const std::string suite = argc < 3 ? "gpt" : argv[2];
  const at::ScalarType dtype = f64 ? at::kDouble : at::kFloat;
  const double tol = f64 ? kTolDouble : kTolFloat;
  const ProcessEnv env = process_env_from_environment();
  bool exceeded = false;
  const int status = run_this_process(
      env,
      [&](CommWorld& w) {
        const int p = w.world_size();
        const std::vector<Group> groups = suite_groups(suite, p);
        TrainerOptions o;
        o.dtype = dtype;
        o.device = c10::Device(c10::kCUDA,
                               static_cast<c10::DeviceIndex>(local_cuda_index(env.local_rank)));
        double loss_max = 0, grad_max = 0;
        size_t count = 0;
        for (const Group& g : groups) {
          const Reference ref = make_reference(g.model, dtype);
          for (const Case& c : g.cases) {
            bool on_gpu = false;
            const Outcome got = evaluate_case(g.model, c, w, o, ref, &on_gpu);
            ++count;
            if (!on_gpu) throw std::runtime_error(c.name + ": a shard is not on the GPU");
            loss_max = std::max(loss_max, got.loss_err);
            grad_max = std::max(grad_max, got.grad_err);
            if (w.rank() == 0)
              std::printf("%s: loss_err %.2e grad_err %.2e (worst %s)\n", c.name.c_str(),
                          got.loss_err, got.grad_err, got.worst.c_str());
            exceeded = exceeded || !(got.loss_err <= tol) || !(got.grad_err <= tol);
          }
        }
        if (w.rank() == 0)
          std::printf("max loss_err %.2e grad_err %.2e over %zu cases, P=%d, %s %s on %s\n",
                      loss_max, grad_max, count, p, suite.c_str(), f64 ? "float64" : "float32",
                      o.device.str().c_str());
        std::fflush(stdout);
      },
      /*timeout_s=*/120);
  if (status != 0) return status;
  return exceeded ? 3 : 0;
}
