// One rank process of cuda_equivalence_test: ranks that share one GPU must be processes (each
// process has its own autograd engine; rank threads would share the GPU's one backward thread
// and deadlock in a collective). Every rank puts its shards on cuda:0, the ranks talk over Gloo
// (staged through the host), and each case's loss and gathered gradients are compared with
// the single-rank reference on the CPU. Rank 0 prints one line per case and a summary line
// "max loss_err <x> grad_err <y> over <n> cases"; the exit status is 3 when an error exceeds
// the tolerance. argv[1]: float64 | float32.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "runtime/live/comm/device.h"
#include "runtime/live/launch/process_ranks.h"
#include "tests/live/model/equivalence_util.h"

int main(int argc, char** argv) {
  using namespace shardgym;
  using namespace shardgym::live;
  using namespace shardgym::live::testing;
  const bool f64 = argc < 2 || std::string(argv[1]) == "float64";
  const at::ScalarType dtype = f64 ? at::kDouble : at::kFloat;
  const double tol = f64 ? kTolDouble : kTolFloat;
  const ProcessEnv env = process_env_from_environment();
  bool exceeded = false;
  const int status = run_this_process(
      env,
      [&](CommWorld& w) {
        const ModelSpec m = tiny_model();
        const int p = w.world_size();
        std::vector<Case> cases = uniform_cases(m, p);
        for (Case& c : mixture_cases(m, p, 6, 500 + p)) cases.push_back(std::move(c));
        const Reference ref = make_reference(m, dtype);
        TrainerOptions o;
        o.dtype = dtype;
        o.device = c10::Device(c10::kCUDA,
                               static_cast<c10::DeviceIndex>(local_cuda_index(env.local_rank)));
        double loss_max = 0, grad_max = 0;
        for (const Case& c : cases) {
          bool on_gpu = false;
          const Outcome got = evaluate_case(m, c, w, o, ref, &on_gpu);
          if (!on_gpu) throw std::runtime_error(c.name + ": a shard is not on the GPU");
          loss_max = std::max(loss_max, got.loss_err);
          grad_max = std::max(grad_max, got.grad_err);
          if (w.rank() == 0)
            std::printf("%s: loss_err %.2e grad_err %.2e (worst %s)\n", c.name.c_str(),
                        got.loss_err, got.grad_err, got.worst.c_str());
          exceeded = exceeded || !(got.loss_err <= tol) || !(got.grad_err <= tol);
        }
        if (w.rank() == 0)
          std::printf("max loss_err %.2e grad_err %.2e over %zu cases, P=%d, %s on %s\n",
                      loss_max, grad_max, cases.size(), p, f64 ? "float64" : "float32",
                      o.device.str().c_str());
        std::fflush(stdout);
      },
      /*timeout_s=*/120);
  if (status != 0) return status;
  return exceeded ? 3 : 0;
}
