// ReturnScale: rewards divided by the running standard deviation of the discounted return,
// PPO's norm_reward (agents/ppo.h). The statistic is Gymnasium's NormalizeReward (and SB3's
// VecNormalize with norm_reward): each env's return G ← γ·G + r, a running mean and variance
// of every G seen (RunningMeanStd: mean 0, variance 1, count 1e-4 to start), and r / sqrt(var
// + 1e-8) handed to the learner. Not clipped: it changes the scale of the returns, never
// their order, so a rare, very costly step (a restart after a lost node) stays as costly
// relative to the others while the value function and the advantages see returns of order 1.
// Engstrom et al. (ICLR'20, "Implementation Matters in Deep Policy Gradients") count reward
// scaling among the code-level choices that change PPO's results.
#pragma once

#include <cstddef>
#include <vector>

namespace shardgym {

struct ReturnScale {
  double mean = 0, var = 1, count = 1e-4;
  std::vector<double> ret;  // each env's discounted return so far

  // Every env (n of them) starts an episode; the statistics stay.
  void start_episodes(int n) { ret.assign(static_cast<std::size_t>(n), 0.0); }
  // Adds `reward` to env i's return and the return to the statistics, then gives the reward
  // over the returns' standard deviation; `done` (the episode ended with this step) starts a
  // new return after it.
  double scale(int i, double reward, double gamma, bool done);
};

}  // namespace shardgym
