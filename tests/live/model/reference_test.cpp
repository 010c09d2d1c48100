// The single-rank reference GPT and the AdamW it trains with: parameter counts agree with
// runtime/core, the model is causal, and our AdamW + global-norm clipping reproduces
// torch::optim::AdamW + torch::nn::utils::clip_grad_norm_ step for step.
#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/live/tp/reference_gpt.h"
#include "runtime/live/tp/rotary.h"
#include "tests/live/model/model_test_util.h"

namespace shardgym::live {
namespace {

using testing::Batch;
using testing::perturbed_params;
using testing::random_batch;
using testing::tiny_llama;
using testing::tiny_model;

TEST(ReferenceGpt, ParameterCountsMatchTheModelSpec) {
  const ModelSpec m = tiny_model();
  const ParamMap p = init_gpt_params(m, at::kDouble, 1);
  int64_t blocks = 0, outer = 0;
  for (const auto& [name, t] : p) (name.rfind("h.", 0) == 0 ? blocks : outer) += t.numel();
  int64_t want_blocks = 0;
  for (int b = 0; b < m.num_blocks(); ++b) want_blocks += m.block_params(b);
  EXPECT_EQ(blocks, want_blocks);
  EXPECT_EQ(outer, m.embedding_params());
}

TEST(ReferenceGpt, InitialLossIsNearUniformAndInitIsSeeded) {
  const ModelSpec m = tiny_model();
  ReferenceGpt a(m, init_gpt_params(m, at::kDouble, 7));
  ReferenceGpt b(m, init_gpt_params(m, at::kDouble, 7));
  ReferenceGpt c(m, init_gpt_params(m, at::kDouble, 8));
  const auto batch = random_batch(m, 4, 3);
  const double la = a.loss(batch.tokens, batch.targets).item<double>();
  // Small initial weights give near-uniform predictions: loss ≈ ln(V) within a few percent.
  EXPECT_NEAR(la, std::log(double(m.vocab)), 0.05 * std::log(double(m.vocab)));
  EXPECT_EQ(la, b.loss(batch.tokens, batch.targets).item<double>());
  EXPECT_NE(la, c.loss(batch.tokens, batch.targets).item<double>());
}

TEST(ReferenceGpt, PositionsDoNotSeeTheFuture) {
  const ModelSpec m = tiny_model();
  ReferenceGpt gpt(m, perturbed_params(m, at::kDouble, 2));
  auto batch = random_batch(m, 2, 5);
  // The loss of the first 4 positions must not change when later tokens change.
  at::Tensor t2 = batch.tokens.clone();
  t2.narrow(1, 4, 4).fill_(0);
  at::Tensor tg = batch.targets.clone();
  tg.narrow(1, 4, 4).fill_(-100);  // ignored positions
  const double l1 = gpt.loss(batch.tokens, tg).item<double>();
  const double l2 = gpt.loss(t2, tg).item<double>();
  EXPECT_DOUBLE_EQ(l1, l2);
}

// Llama's parameter set: no wpe, no biases, RMSNorm weights only, the LM head tied or not;
// shapes from qkv_width (h + 2·kv·d) and fc1_width (2·ffn); counts as runtime/core has them.
TEST(ReferenceLlama, ParameterSetAndCountsMatchTheModelSpec) {
  for (bool tied : {false, true}) {
    const ModelSpec m = tiny_llama(tied);
    const ParamMap p = init_gpt_params(m, at::kDouble, 1);
    int64_t blocks = 0, outer = 0;
    for (const auto& [name, t] : p) {
      (name.rfind("h.", 0) == 0 ? blocks : outer) += t.numel();
      EXPECT_EQ(name.find("bias"), std::string::npos) << name;
    }
    EXPECT_EQ(p.count("wpe"), 0u);
    EXPECT_EQ(p.count("lm_head.weight"), tied ? 0u : 1u);
    EXPECT_EQ(p.at("h.0.attn.qkv.weight").sizes(), (at::IntArrayRef{48, 48 + 2 * 4 * 4}));
    EXPECT_EQ(p.at("h.1.mlp.fc1.weight").sizes(), (at::IntArrayRef{48, 2 * 72}));
    EXPECT_EQ(p.at("h.1.mlp.fc2.weight").sizes(), (at::IntArrayRef{72, 48}));
    EXPECT_TRUE(at::equal(p.at("h.0.mlp.ln.weight"), at::ones({48}, at::kDouble)));
    int64_t want_blocks = 0;
    for (int b = 0; b < m.num_blocks(); ++b) want_blocks += m.block_params(b);
    EXPECT_EQ(blocks, want_blocks);
    EXPECT_EQ(outer, m.embedding_params());
  }
}

// Llama written out head by head, independently of reference_gpt.cpp: RMSNorm as its formula,
// each query head j reading columns of its group g = j / (heads/kv) (group g's query heads,
// then its K, then its V), rotary as the rotation of each pair (i, i + d/2) by p·θ^(-2i/d) at
// position p, SwiGLU with gate 2j and up 2j + 1.
at::Tensor rms(const at::Tensor& x, const at::Tensor& w) {
  return x / at::sqrt(x.pow(2).mean(-1, true) + 1e-5) * w;
}

at::Tensor rotate_pairs(const at::Tensor& x) {  // [B, S, d]
  const int64_t S = x.size(1), d = x.size(2), half = d / 2;
  at::Tensor y = x.clone();
  for (int64_t pos = 0; pos < S; ++pos)
    for (int64_t i = 0; i < half; ++i) {
      const double a = pos * std::pow(500000.0, -2.0 * i / d);
      const at::Tensor u = x.select(1, pos).select(1, i), v = x.select(1, pos).select(1, i + half);
      y.select(1, pos).select(1, i).copy_(u * std::cos(a) - v * std::sin(a));
      y.select(1, pos).select(1, i + half).copy_(v * std::cos(a) + u * std::sin(a));
    }
  return y;
}

double handwritten_llama_loss(const ModelSpec& m, const ParamMap& p, const Batch& b) {
  const int64_t B = b.tokens.size(0), S = m.seq, d = m.head_dim();
  const int64_t per = m.heads / m.kv_head_count(), gw = (per + 2) * d;
  at::Tensor x = at::embedding(p.at("wte"), b.tokens);
  const at::Tensor future = at::ones({S, S}, at::kBool).triu(1);
  for (int l = 0; l < m.layers; ++l) {
    const std::string a = "h." + std::to_string(l) + ".attn.";
    const std::string f = "h." + std::to_string(l) + ".mlp.";
    const at::Tensor qkv = at::matmul(rms(x, p.at(a + "ln.weight")), p.at(a + "qkv.weight"));
    std::vector<at::Tensor> heads;
    for (int64_t j = 0; j < m.heads; ++j) {
      const int64_t g = j / per;
      const at::Tensor q = rotate_pairs(qkv.narrow(2, g * gw + (j % per) * d, d));
      const at::Tensor k = rotate_pairs(qkv.narrow(2, g * gw + per * d, d));
      const at::Tensor v = qkv.narrow(2, g * gw + (per + 1) * d, d);
      at::Tensor s = at::bmm(q, k.transpose(1, 2)) / std::sqrt(double(d));
      heads.push_back(at::bmm(at::softmax(s.masked_fill(future, -INFINITY), -1), v));
    }
    x = x + at::matmul(at::cat(heads, 2), p.at(a + "proj.weight"));
    const at::Tensor z = at::matmul(rms(x, p.at(f + "ln.weight")), p.at(f + "fc1.weight"));
    const at::Tensor gate = z.index({"...", at::indexing::Slice(0, at::indexing::None, 2)});
    const at::Tensor up = z.index({"...", at::indexing::Slice(1, at::indexing::None, 2)});
    x = x + at::matmul(gate * at::sigmoid(gate) * up, p.at(f + "fc2.weight"));
  }
  const at::Tensor head = m.tied_embeddings ? p.at("wte").t() : p.at("lm_head.weight");
  const at::Tensor logits = at::matmul(rms(x, p.at("ln_f.weight")), head);
  return at::cross_entropy_loss(logits.reshape({B * S, m.vocab}), b.targets.reshape({B * S}))
      .item<double>();
}

TEST(ReferenceLlama, MatchesAHandWrittenLlama) {
  for (bool tied : {false, true}) {
    const ModelSpec m = tiny_llama(tied);
    const ParamMap p = perturbed_params(m, at::kDouble, 3);
    const auto batch = random_batch(m, 3, 4);
    const double want = handwritten_llama_loss(m, p, batch);
    EXPECT_NEAR(ReferenceGpt(m, p).loss(batch.tokens, batch.targets).item<double>(), want,
                1e-12 * want)
        << "tied " << tied;
  }
}

// The traits are used: without rotary (and with a zero wpe) the loss changes, and so it does
// with SwiGLU's gate and up columns swapped; grouped-query attention equals multi-head
// attention whose K and V heads are the groups' repeated.
TEST(ReferenceLlama, EveryTraitChangesTheLoss) {
  const ModelSpec m = tiny_llama();
  const ParamMap p = perturbed_params(m, at::kDouble, 5);
  const auto batch = random_batch(m, 2, 6);
  const double base = ReferenceGpt(m, p).loss(batch.tokens, batch.targets).item<double>();
  ModelSpec no_rotary = m;
  no_rotary.rotary = false;
  ParamMap with_wpe = p;
  with_wpe["wpe"] = at::zeros({m.seq, m.hidden}, at::kDouble);
  EXPECT_GT(std::abs(ReferenceGpt(no_rotary, with_wpe).loss(batch.tokens, batch.targets)
                         .item<double>() - base), 1e-6);
  ParamMap swapped = p;
  for (int l = 0; l < m.layers; ++l) {
    at::Tensor& w = swapped["h." + std::to_string(l) + ".mlp.fc1.weight"];
    w = w.view({m.hidden, m.ffn, 2}).flip(2).reshape({m.hidden, 2 * m.ffn});
  }
  EXPECT_GT(std::abs(ReferenceGpt(m, swapped).loss(batch.tokens, batch.targets).item<double>() -
                     base), 1e-6);
  ModelSpec mha = m;  // 12 K/V heads: a wider QKV, the GQA model's K and V repeated in it
  mha.kv_heads = 0;
  ParamMap repeated = p;
  for (int l = 0; l < m.layers; ++l) {
    const std::string name = "h." + std::to_string(l) + ".attn.qkv.weight";
    const at::Tensor g = p.at(name).view({m.hidden, 4, 5, 4});  // [h, groups, 3 q + k + v, d]
    std::vector<at::Tensor> cols;
    for (int j = 0; j < 12; ++j)
      for (int64_t part : {int64_t(j % 3), int64_t(3), int64_t(4)})
        cols.push_back(g.select(1, j / 3).select(1, part));
    repeated[name] = at::cat(cols, 1);
  }
  // Grouped-query attention is multi-head attention with each group's K and V repeated.
  EXPECT_NEAR(ReferenceGpt(mha, repeated).loss(batch.tokens, batch.targets).item<double>(), base,
              1e-12 * base);
}

// Rotary embeddings: position 0 is the identity, norms are kept, and a query·key score
// depends only on their distance; the second pair turns by θ^(-2/d), θ = 500000.
TEST(Rotary, IsARelativeRotationWithLlama3sTheta) {
  at::Generator gen = at::detail::createCPUGenerator(9);
  const at::Tensor q = at::randn({8}, gen, at::kDouble), k = at::randn({8}, gen, at::kDouble);
  const at::Tensor qs = apply_rotary(q.expand({12, 8}).clone());  // q at positions 0..11
  const at::Tensor ks = apply_rotary(k.expand({12, 8}).clone());
  EXPECT_TRUE(at::allclose(qs[0], q, 0, 0));
  EXPECT_NEAR(qs[7].norm().item<double>(), q.norm().item<double>(), 1e-12);
  EXPECT_NEAR(at::dot(qs[9], ks[4]).item<double>(), at::dot(qs[5], ks[0]).item<double>(), 1e-12);
  EXPECT_GT(std::abs(at::dot(qs[9], ks[4]).item<double>() - at::dot(qs[5], ks[5]).item<double>()),
            1e-6);
  const at::Tensor e = at::zeros({2, 8}, at::kDouble);
  e.select(1, 1).fill_(1);
  const double a = std::pow(kRopeTheta, -2.0 / 8);
  EXPECT_NEAR(apply_rotary(e)[1][1].item<double>(), std::cos(a), 1e-15);
  EXPECT_NEAR(apply_rotary(e)[1][5].item<double>(), std::sin(a), 1e-15);
  EXPECT_EQ(kRopeTheta, 500000.0);
}

TEST(AdamW, MatchesTorchOptimAdamWWithClipping) {
  const ModelSpec m = tiny_model();
  const ParamMap init = perturbed_params(m, at::kDouble, 4);
  const double lr = 1e-2, wd = 0.1, clip = 0.3;
  ReferenceTrainer ours(m, init, AdamWOptions{lr, 0.9, 0.999, 1e-8, wd}, clip);

  ReferenceGpt theirs(m, init);
  std::vector<at::Tensor> decay, no_decay;
  for (const ParamShard& s : full_param_specs(m))
    (s.decay ? decay : no_decay).push_back(theirs.params().at(s.name));
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(lr).weight_decay(wd)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(
                                    torch::optim::AdamWOptions(lr).weight_decay(0)));
  torch::optim::AdamW opt(groups, torch::optim::AdamWOptions(lr));
  std::vector<at::Tensor> all = decay;
  all.insert(all.end(), no_decay.begin(), no_decay.end());

  bool clipped = false;
  for (int step = 0; step < 4; ++step) {
    const auto batch = random_batch(m, 8, 100 + step);
    const double l_ours = ours.train_step(batch.tokens, batch.targets);
    opt.zero_grad();
    at::Tensor l = theirs.loss(batch.tokens, batch.targets);
    l.backward();
    clipped |= torch::nn::utils::clip_grad_norm_(all, clip) > clip;
    opt.step();
    EXPECT_NEAR(l_ours, l.item<double>(), 1e-12) << "step " << step;
  }
  EXPECT_TRUE(clipped) << "the clip threshold should bite in this test";
  std::string worst;
  // float64, same operation order up to the norm's summation order: 1e-10 relative.
  EXPECT_LT(testing::max_rel_err(ours.gpt().params(), theirs.params(), &worst), 1e-10) << worst;
}

}  // namespace
}  // namespace shardgym::live
