// PPO's actor-critic network (private to shardgym::agents_rl: includes LibTorch).
//
// obs [N, D] with D = B·F + G (F = PartitionEnv::kBlockFeatures per block, then G globals):
//   in_b   = [block features (F), is_attention, is_mlp, b / B, globals (G)]      [N, B, F+3+G]
//   h_b    = tanh(W2 · tanh(W1 · in_b))                                          [N, B, H]
//   logits = W_pi · h_b (+ keep_kind on the block's current entry), −inf where masked [N, B, K]
//   value  = w_v · tanh(W_v · [mean_b h_b, globals])                              [N]
// With a pipeline component (M = 2p − 1 choices, env/pipeline_action.h) one more row of logits
// comes from the pooled embedding, W_pp · [mean_b h_b, globals] (+ keep on choice 0), and
// every row is padded to W = max(K, M) entries (the padding is masked): logits [N, B+1, W].
// keep_kind: one learned logit bonus per block kind for the entry in force (read from the
// block's first feature, catalog index / K). Keeping a plan is what avoids repartitions, and
// without it "keep" must be learnt separately for every entry.
// With plan rows (PPO's plan=1) three more rows: the plan-move row (2 choices: 0 = the blocks'
// own rows decide, 1 = move the whole plan), fixed at log(1 − plan_p), log(plan_p) (an
// exploration rate, not learnt), and two rows over the catalog, W_plan · c + b_plan with c the
// run's conditions among the globals (phase, sequence factor, compute slowdown, link
// bandwidths; not the plan in force or its measurements, so that the destination does not
// change with the plan just taken): the entry every attention block and every MLP block takes
// on a plan move. Rows: B blocks, [pipeline], then move, attention, MLP; W = max(K, M, 2).
// Orthogonal initialisation as in CleanRL (gain √2, policy head 0.01, value head 1).
#pragma once

#include <torch/torch.h>

namespace shardgym::ppo_detail {

struct PolicyNetImpl : torch::nn::Module {
  // tail: observation entries after the conditions (the pipeline part); -1 = moves.
  PolicyNetImpl(int blocks, int catalog, int block_features, int globals, int hidden, bool keep,
                int moves = 0, double plan_p = 0, int tail = -1);  // plan_p > 0: the plan rows

  // Masked logits [N, R, W] and values [N] (R = B rows, + 1 with moves; W = max(K, moves)).
  // mask: bool [N, R, W]. with_keep = false leaves out the keep bonus (the learned preference
  // alone; PPO's `decode=pref`).
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& obs,
                                                  const torch::Tensor& mask,
                                                  bool with_keep = true);

  int blocks, catalog, block_features, globals, hidden;
  bool keep;
  int moves;  // pipeline choices, 0 = none
  bool plan;  // the three plan rows
  torch::nn::Linear enc1{nullptr}, enc2{nullptr}, pi{nullptr}, v1{nullptr}, v2{nullptr};
  torch::nn::Linear pi_pp{nullptr};    // the pipeline row (moves > 0)
  torch::nn::Linear pi_plan{nullptr};  // the plan entry rows (plan): K + K logits
  torch::Tensor block_extra;  // [B, 3]: kind one-hot, position
  torch::Tensor block_kind;   // [B] long: 0 attention, 1 MLP
  torch::Tensor keep_bias;    // [2], [3] with moves: per block kind, then choice 0 (keep)
  torch::Tensor plan_move;    // [2] (plan): the plan-move row's fixed log-probabilities
  torch::Tensor plan_conditions;  // (plan): indices of the globals pi_plan reads
};
TORCH_MODULE(PolicyNet);

// Joint log-probability and entropy of per-row categoricals (sums over the rows: blocks, and
// the pipeline row), [N] each.
struct PlanDistribution {
  torch::Tensor log_probs;  // [N, R, W], −inf where masked
  torch::Tensor mask;       // [N, R, W] bool

  torch::Tensor log_prob(const torch::Tensor& actions) const;        // actions: long [N, R]
  torch::Tensor block_log_prob(const torch::Tensor& actions) const;  // [N, R]
  torch::Tensor entropy() const;
  torch::Tensor sample(at::Generator& gen) const;  // long [N, R]
  torch::Tensor mode() const;                      // long [N, R]
};
PlanDistribution distribution(const torch::Tensor& masked_logits, const torch::Tensor& mask);

}  // namespace shardgym::ppo_detail
