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

#include "runtime/live/device.h"
#include "runtime/live/launch_process.h"
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
        const ParamMap init = perturbed_params(m, dtype, 11);
        const auto batch = random_batch(m, m.global_batch, 12);
        ReferenceGpt ref(m, perturbed_params(m, at::kDouble, 11));
        at::Tensor ref_loss = ref.loss(batch.tokens, batch.targets);
        ref_loss.backward();
        const ParamMap ref_grads = ref.grads();
        const double want = ref_loss.item<double>();
        TrainerOptions o;
        o.dtype = dtype;
        o.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_cuda_index(env.local_rank)));
        double loss_max = 0, grad_max = 0;
        for (const Case& c : cases) {
          RankTrainer tr(m, c.plan, w, o);
          tr.load_full_params(init);
          const double loss = tr.forward_backward(batch.tokens, batch.targets);
          ParamMap grads = tr.gather_full_grads();
          bool on_gpu = true;
          for (const auto& kv : tr.local_params()) on_gpu = on_gpu && kv.second.is_cuda();
          for (auto& kv : grads) kv.second = kv.second.cpu();
          std::string worst;
          const double le = std::abs(loss - want) / std::abs(want);
          const double ge = max_rel_err(grads, ref_grads, &worst);
          loss_max = std::max(loss_max, le);
          grad_max = std::max(grad_max, ge);
          if (!on_gpu) throw std::runtime_error(c.name + ": a shard is not on the GPU");
          if (w.rank() == 0)
            std::printf("%s: loss_err %.2e grad_err %.2e (worst %s)\n", c.name.c_str(), le, ge,
                        worst.c_str());
          exceeded = exceeded || !(le <= tol) || !(ge <= tol);
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
