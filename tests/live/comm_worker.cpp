// A rank process for process_test: meets its peers through the TCPStore named by the
// torchrun-style variables and checks a few collectives. argv[1]: "ok", "throw" (rank 2
// throws after the first collective) or "die" (rank 2 kills itself there).
#include <signal.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include "runtime/live/launch/process_ranks.h"

int main(int argc, char** argv) {
  using namespace shardgym::live;
  const std::string mode = argc > 1 ? argv[1] : "ok";
  const ProcessEnv env = process_env_from_environment();
  return run_this_process(
      env,
      [&](CommWorld& w) {
        const int p = w.world_size();
        at::Tensor t = at::full({4}, double(w.rank() + 1), at::kDouble);
        w.world().all_reduce(t);
        if (t[0].item<double>() != p * (p + 1) / 2.0) throw std::runtime_error("wrong all_reduce");
        if (w.rank() == 2 && mode == "throw") throw std::runtime_error("worker fault");
        if (w.rank() == 2 && mode == "die") ::raise(SIGKILL);
        at::Tensor g = w.world().all_gather(at::full({1}, double(w.rank()), at::kDouble), 0);
        if (!at::equal(g, at::arange(p, at::kDouble))) throw std::runtime_error("wrong all_gather");
        for (int i = 0; i < 3; ++i) w.world().all_reduce(t);
        if (w.rank() < 2) w.group({0, 1}).barrier();  // a subgroup, created by its members only
      },
      /*timeout_s=*/20);
}
