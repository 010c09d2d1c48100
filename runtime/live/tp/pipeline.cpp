// Pipeline stages on live ranks: one iteration's micro-batches through this rank's stage.
//
// Stage s holds ranks [s·P/p, (s+1)·P/p) and its layers' blocks (runtime/core/plan.h); inside a
// stage every block runs as without a pipeline, over the stage's P/p ranks. Between stages the
// residual stream travels in the stages' data-parallel layout: stage-local rank j holds rows
// [j·G/(m·S), (j+1)·G/(m·S)) of a micro-batch (S = P/p) and sends them to rank j of the next
// stage, which has the same layout (Megatron-LM's scatter-gather optimisation sends the same
// 1/S share per rank). Gradients of those rows go back the same way.
//
// Micro-batch i is slice i of each stage-local rank's rows of the global batch, as
// micro_batches.h cuts it over one stage, so a stage's ranks take the rows the first stage's
// embedding takes. Schedules, as Megatron-LM runs them (megatron/core/pipeline_parallel/
// schedules.py):
//   - 1F1B (forward_backward_pipelining_without_interleaving): stage s runs min(p − s − 1, m)
//     warm-up forwards, then alternates one forward and one backward, then drains the
//     remaining backwards; a stage holds at most p − s micro-batches' activations.
//   - GPipe: every forward, then every backward, in micro-batch order.
// Each transfer is one call of Comm::batch_p2p, as each of Megatron-LM's p2p_communication
// calls posts its sends and receives together and waits for them: send_forward_recv_backward
// and send_backward_recv_forward pair two transfers with one neighbour, which is what keeps two
// neighbours that both send first from waiting on each other.
//
// The loss is the last stage's; every other stage's share is 0, and global_loss sums them.
// Gradient synchronisation and the optimizer step run after the last backward, as without a
// pipeline (rank_trainer.cpp), each block's over its stage's ranks.
#include <algorithm>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "runtime/live/tp/rank_state.h"

namespace shardgym::live {
namespace {

class StagePipeline {
 public:
  StagePipeline(RankTrainer::State& st, const at::Tensor& tokens, const at::Tensor& targets,
                int m, bool train, BlockTimes* times, double mean_over)
      : st_(st),
        m_(m),
        train_(train),
        times_(times),
        mean_over_(mean_over),
        p_(st.plan.stages()),
        stage_(st.stage.index),
        local_(st.rank - st.stage.first),
        per_(tokens.size(0) / (static_cast<int64_t>(m) * st.stage.size)),
        ap_(activation_plans(st, BatchRows::whole(tokens.size(0) / m))),
        world_(st.groups->world().world()),
        tokens_(tokens),
        targets_(targets),
        ins_(m),
        outs_(m),
        share_(at::zeros({1}, at::kDouble)) {}

  at::Tensor run() {
    if (!train_ || st_.plan.pipeline.schedule == Schedule::kGPipe) {
      for (int i = 0; i < m_; ++i) send_forward(forward(i, recv_forward()));
      if (train_)
        for (int i = 0; i < m_; ++i) send_backward(backward(i, recv_backward()));
      return share_;
    }
    const int warmup = std::min(p_ - stage_ - 1, m_), steady = m_ - warmup;
    for (int i = 0; i < warmup; ++i) send_forward(forward(i, recv_forward()));
    at::Tensor x = steady > 0 ? recv_forward() : at::Tensor();
    for (int j = 0; j < steady; ++j) {
      const at::Tensor grad = send_forward_recv_backward(forward(warmup + j, x));
      const at::Tensor grad_in = backward(j, grad);
      if (j == steady - 1) send_backward(grad_in);
      else x = send_backward_recv_forward(grad_in);
    }
    for (int i = 0; i < warmup; ++i) send_backward(backward(steady + i, recv_backward()));
    return share_;
  }

 private:
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == p_ - 1; }
  int prev_rank() const { return st_.rank - st_.stage.size; }
  int next_rank() const { return st_.rank + st_.stage.size; }

  // This rank's rows of micro-batch i of a [G, S] batch.
  at::Tensor rows(const at::Tensor& batch, int i) const {
    const int64_t seq = batch.size(1);
    return batch.reshape({st_.stage.size, m_, per_, seq})
        .select(1, i)
        .select(0, local_)
        .to(st_.options.device);
  }
  at::Tensor empty_activation() const {
    return at::empty({per_, st_.model.seq, st_.model.hidden},
                     at::TensorOptions().dtype(st_.options.dtype).device(st_.options.device));
  }

  // Micro-batch i's forward through the stage; `x` is the previous stage's output (undefined on
  // the first). Returns what goes to the next stage (undefined on the last).
  at::Tensor forward(int i, at::Tensor x) {
    if (first()) {
      x = embed(st_, rows(tokens_, i));
    } else {
      x.requires_grad_(train_);
      ins_[i] = x;
    }
    x = stage_forward(st_, x, ap_, train_ && times_, times_);
    if (last()) {
      at::Tensor loss = head_loss(st_, x, rows(targets_, i), mean_over_);
      share_ += loss.detach().to(at::kDouble).reshape({1}).cpu();
      if (train_) outs_[i] = loss;
      return at::Tensor();
    }
    if (train_) outs_[i] = x;
    return x.detach();
  }
  // Micro-batch i's backward from the gradient of its output (none on the last stage).
  // Returns the gradient of its input for the previous stage (undefined on the first).
  at::Tensor backward(int i, const at::Tensor& grad) {
    reset_backward_probes(st_);
    if (last()) outs_[i].backward();
    else outs_[i].backward(grad);
    add_backward_times(st_, times_);
    at::Tensor grad_in = first() ? at::Tensor() : ins_[i].grad();
    outs_[i] = at::Tensor();  // frees the micro-batch's activations
    ins_[i] = at::Tensor();
    return grad_in;
  }

  void p2p(std::vector<Comm::P2POp> ops) {
    if (!ops.empty()) world_.batch_p2p(ops);
  }
  at::Tensor recv_forward() {
    if (first()) return at::Tensor();
    at::Tensor x = empty_activation();
    p2p({{false, x, prev_rank()}});
    return x;
  }
  void send_forward(const at::Tensor& y) {
    if (!last()) p2p({{true, y, next_rank()}});
  }
  at::Tensor recv_backward() {
    if (last()) return at::Tensor();
    at::Tensor g = empty_activation();
    p2p({{false, g, next_rank()}});
    return g;
  }
  void send_backward(const at::Tensor& g) {
    if (!first()) p2p({{true, g, prev_rank()}});
  }
  at::Tensor send_forward_recv_backward(const at::Tensor& y) {
    if (last()) return at::Tensor();
    at::Tensor g = empty_activation();
    p2p({{true, y, next_rank()}, {false, g, next_rank()}});
    return g;
  }
  at::Tensor send_backward_recv_forward(const at::Tensor& g) {
    if (first()) return at::Tensor();
    at::Tensor x = empty_activation();
    p2p({{true, g, prev_rank()}, {false, x, prev_rank()}});
    return x;
  }

  RankTrainer::State& st_;
  const int m_;
  const bool train_;
  BlockTimes* times_;
  const double mean_over_;
  const int p_, stage_, local_;
  const int64_t per_;
  const ActivationPlans& ap_;
  Comm& world_;
  const at::Tensor& tokens_;
  const at::Tensor& targets_;
  std::vector<at::Tensor> ins_, outs_;  // per micro-batch: the stage's input leaf, its output
  at::Tensor share_;
};

}  // namespace

at::Tensor run_pipeline(RankTrainer::State& st, const at::Tensor& tokens,
                        const at::Tensor& targets, int micro_batches, bool train,
                        BlockTimes* times, double mean_over) {
  return StagePipeline(st, tokens, targets, micro_batches, train, times, mean_over).run();
}

}  // namespace shardgym::live
