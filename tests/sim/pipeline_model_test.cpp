// Pipeline schedules, micro-batches and the nccl-tests collective model (docs/design.md §4).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/live_memory.h"
#include "runtime/core/plan.h"
#include "runtime/sim/collective_model.h"
#include "runtime/sim/pipeline_model.h"
#include "runtime/sim/sim_run.h"
#include "sim_fixtures.h"

namespace shardgym {
namespace {

using testing::cluster;
using testing::experiment;
using testing::gpt;
using testing::h100_sxm;
using testing::nvswitch;

// `m` with global batch `global_batch` on `nodes` nodes of 8 H100s over NVSwitch, starting
// from `plan`.
ExperimentSpec h100_spec(ModelSpec m, int global_batch, int nodes, const std::string& plan) {
  m.global_batch = global_batch;
  ExperimentSpec spec = experiment(m, cluster(nodes, 8, h100_sxm(), nvswitch()));
  spec.initial_plan = plan;
  return spec;
}

TEST(PipelineModel, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (int p : {2, 4, 8}) {
    for (int m : {1, 4, 16, 64}) {
      const double c = 0.01;  // equal stages: one micro-batch's fwd + bwd
      const std::vector<double> stages(p, c);
      const double t = pipeline_time(stages, m, Schedule::k1F1B, 1);
      const double ideal = m * c;
      EXPECT_NEAR((t - ideal) / t, double(p - 1) / (m + p - 1), 1e-12) << "p=" << p << " m=" << m;
      EXPECT_NEAR(bubble_fraction(p, m, 1), double(p - 1) / (m + p - 1), 1e-15);
    }
  }
}

TEST(PipelineModel, InterleavingDividesTheBubbleByV) {
  const std::vector<double> stages(4, 1.0);
  const double t1 = pipeline_time(stages, 8, Schedule::k1F1B, 1);
  const double t3 = pipeline_time(stages, 8, Schedule::kInterleaved, 3);
  EXPECT_DOUBLE_EQ(t1 - 8, 3.0);
  EXPECT_DOUBLE_EQ(t3 - 8, 1.0);
  EXPECT_NEAR(bubble_fraction(4, 8, 3), 3.0 / (24 + 3), 1e-15);
}

TEST(PipelineModel, TheSlowestStageSetsThePace) {
  const std::vector<double> stages = {1.0, 2.0, 1.0};
  // 10 micro-batches at the slowest stage's pace, plus the other stages' fill and drain.
  EXPECT_DOUBLE_EQ(pipeline_time(stages, 10, Schedule::k1F1B, 1), 10 * 2.0 + 2.0);
}

// Megatron-LM's 1F1B with blocking transfers, equal stages, replayed: a middle stage waits
// for two transfers per micro-batch, the end stages for one, so (p ≥ 3)
//   T = (m + p − 1)·(C + 2X) − 3X   (m ≥ p),   p = 2: (m + 1)·(C + X),   m = 1: p·C + 2(p − 1)·X
// (derived by hand from the order of schedules.py's warm-up, steady and cool-down phases).
TEST(PipelineModel, OneFOneBReplayWaitsForItsTransfers) {
  const double f = 1.0, b = 2.0, x = 0.1, c = f + b;
  for (int p : {2, 3, 4, 8}) {
    const std::vector<double> fwd(p, f), bwd(p, b), hop(p, x), none(p, 0.0);
    for (int m : {1, 4, 8, 16, 64}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      // Without transfers the replay is Narayanan et al.'s formula.
      EXPECT_NEAR(pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, Schedule::k1F1B),
                  (m + p - 1) * c, 1e-9);
      const double t = pipeline_replay(fwd.data(), bwd.data(), hop.data(), p, m, Schedule::k1F1B);
      if (m == 1) {
        EXPECT_NEAR(t, p * c + 2 * (p - 1) * x, 1e-9);
      } else if (p == 2) {
        EXPECT_NEAR(t, (m + 1) * (c + x), 1e-9);
      } else if (m >= p) {
        EXPECT_NEAR(t, (m + p - 1) * (c + 2 * x) - 3 * x, 1e-9);
      }
    }
  }
}

// Ranks sharing cores (live CPU ranks, pipeline_replay's `cores`): with as many cores as ranks
// the replay is the unshared one; with one core every pass waits for every other, so the
// iteration is all the stages' work, Σ_s m·(f_s + b_s) (no transfers); with c cores it is at
// least that work over c and at most the one-core figure, and more cores never slow it.
TEST(PipelineModel, ReplayOnSharedCores) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  for (int trial = 0; trial < 100; ++trial) {
    const int p = 2 + trial % 5, m = 1 << (trial % 4), S = 1 + trial % 2;
    const Schedule sched = trial % 3 ? Schedule::k1F1B : Schedule::kGPipe;
    std::vector<double> fwd(p), bwd(p), none(p, 0.0);
    double work = 0;
    for (int s = 0; s < p; ++s) {
      fwd[s] = u(rng), bwd[s] = 2 * u(rng);
      work += m * (fwd[s] + bwd[s]);
    }
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " S=" + std::to_string(S));
    const double own = pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched);
    EXPECT_NEAR(pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched, S, p * S), own,
                1e-9);
    EXPECT_NEAR(pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched, S, S), work,
                1e-9);
    double previous = work;
    for (int c = S + 1; c < p * S; ++c) {
      const double t = pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched, S, c);
      EXPECT_GE(t, std::max(own, work * S / c) - 1e-9) << c << " cores";
      EXPECT_LE(t, previous + 1e-9) << c << " cores";
      previous = t;
    }
  }
}

// Passes that wait in collectives (pipeline_replay's `wait_share`): a pass holds its cores
// only for the part it computes, so on one core the iteration is the stages' computing work
// plus what no other stage can fill, bounded below by the unshared replay and by that work,
// above by the fully held one (wait_share 0, or nullptr), and it is the unshared replay when
// every pass only waits.
TEST(PipelineModel, PassesWaitingInCollectivesLeaveTheirCores) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<double> u(0.5, 1.5), w(0.0, 0.9);
  for (int trial = 0; trial < 100; ++trial) {
    const int p = 2 + trial % 4, m = 1 << (trial % 3), S = 1 + trial % 2;
    const Schedule sched = trial % 3 ? Schedule::k1F1B : Schedule::kGPipe;
    std::vector<double> fwd(p), bwd(p), none(p, 0.0), zero(p, 0.0), all(p, 1.0), share(p);
    double computing = 0;
    for (int s = 0; s < p; ++s) {
      fwd[s] = u(rng), bwd[s] = 2 * u(rng), share[s] = w(rng);
      computing += m * (fwd[s] + bwd[s]) * (1 - share[s]);
    }
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " S=" + std::to_string(S));
    const double own = pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched);
    const double held = pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched, S, S);
    EXPECT_NEAR(
        pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched, S, S, zero.data()), held,
        1e-9);
    EXPECT_NEAR(
        pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched, S, S, all.data()), own,
        1e-9);
    const double t =
        pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, sched, S, S, share.data());
    EXPECT_GE(t, std::max(own, computing) - 1e-9);
    EXPECT_LE(t, held + 1e-9);
  }
}

// Unequal stages: the replay is never slower than "the slowest stage sets the pace" (which
// idles every other stage as if it were the slowest), and with transfers it is slower than
// without by at least the fill's and drain's hops and at most two per micro-batch and stage.
TEST(PipelineModel, OneFOneBReplayWithUnequalStagesAndTransfers) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  for (int trial = 0; trial < 200; ++trial) {
    const int p = 2 + trial % 7, m = 1 << (trial % 6);
    std::vector<double> fwd(p), bwd(p), hop(p, 0.05), none(p, 0.0), mb(p);
    for (int s = 0; s < p; ++s) fwd[s] = u(rng), bwd[s] = 2 * fwd[s] * u(rng), mb[s] = fwd[s] + bwd[s];
    const double plain = pipeline_replay(fwd.data(), bwd.data(), none.data(), p, m, Schedule::k1F1B);
    const double with = pipeline_replay(fwd.data(), bwd.data(), hop.data(), p, m, Schedule::k1F1B);
    EXPECT_LE(plain, pipeline_time(mb, m, Schedule::k1F1B, 1) + 1e-9);
    EXPECT_GE(with - plain, 2 * (p - 1) * 0.05 - 1e-9);
    EXPECT_LE(with - plain, 2 * (m + p) * 0.05 + 1e-9);
  }
}

// Interleaved: Megatron-LM's order (schedules.py, get_model_chunk_id) sends, per micro-batch,
// one activation per model chunk except out of the last chunk of the last stage, and one
// gradient per chunk except out of the first chunk of the first stage: 2·m·(p·v − 1) sends
// per iteration (Narayanan et al. 2021 §2.2.2: v times 1F1B's). The model charges each stage
// e_s = v·(in + out) − [s = 0]·in − [s = p − 1]·out per micro-batch (the same count per stage).
TEST(PipelineModel, InterleavedTransfersAreMegatronsCount) {
  for (int p : {2, 4, 8})
    for (int v : {1, 2, 3})
      for (int m : {p, 2 * p, 4 * p}) {
        int sends = 0;
        for (int rank = 0; rank < p; ++rank)
          for (int k = 0; k < m * v; ++k) {
            const int chunk = (k / p) % v;  // forward micro-step k's model chunk
            if (!(rank == p - 1 && chunk == v - 1)) ++sends;  // send_forward
            if (!(rank == 0 && chunk == 0)) ++sends;            // send_backward (reverse order)
          }
        EXPECT_EQ(sends, 2 * m * (p * v - 1)) << "p=" << p << " v=" << v << " m=" << m;
        // One second per transfer, no compute: with blocking transfers a stage's micro-batch
        // costs its count; the slowest (a middle stage, or any at p = 2) sets the pace.
        const std::vector<double> zero(p, 0.0), share(p, 0.5), hop(p, 1.0);
        const double t = pipeline_time_with_transfers(zero.data(), share.data(), hop.data(), p, m,
                                                      Schedule::kInterleaved, v, false);
        const double per_stage = p == 2 ? 2 * v - 1 : 2 * v;
        const double fill = 2 * (v * (p - 1) + (v - 1));
        EXPECT_DOUBLE_EQ(t, m * per_stage + fill);
        EXPECT_DOUBLE_EQ(fill, 2 * (p * v - 1));  // one micro-batch's chunk boundaries, both ways
      }
}

// With overlap_p2p_comm the interleaved schedule's steady transfers hide under compute.
TEST(PipelineModel, OverlappedInterleavedTransfersHideUnderCompute) {
  const int p = 4, v = 2, m = 8;
  const std::vector<double> mb(p, 1.0), share(p, 1.0 / 3), hop(p, 0.01);
  const double blocking = pipeline_time_with_transfers(mb.data(), share.data(), hop.data(), p, m,
                                                       Schedule::kInterleaved, v, false);
  const double overlapped = pipeline_time_with_transfers(mb.data(), share.data(), hop.data(), p,
                                                         m, Schedule::kInterleaved, v, true);
  const double fill = 2 * (p * v - 1) * 0.01;
  EXPECT_DOUBLE_EQ(overlapped, pipeline_time(mb, m, Schedule::kInterleaved, v) + fill);
  EXPECT_NEAR(blocking - overlapped, m * 2 * v * 0.01, 1e-12);
}

TEST(PipelineModel, ActivationsInFlightPerSchedule) {
  // 1F1B: stage s holds p − s micro-batches (at most m); GPipe all m.
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(Schedule::k1F1B, 4, 16, 1, 0), 4);
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(Schedule::k1F1B, 4, 16, 1, 3), 1);
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(Schedule::k1F1B, 4, 2, 1, 0), 2);
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(Schedule::kGPipe, 4, 16, 1, 3), 16);
  // Interleaved, stage 0: p·(1 + (p − 1)/(p·v)) (Korthikanti et al. 2022 §4.2.3).
  const int p = 8, v = 3;
  EXPECT_NEAR(micro_batches_in_flight(Schedule::kInterleaved, p, 64, v, 0),
              p * (1 + (p - 1.0) / (p * v)), 1e-12);
}

TEST(PipelineModel, PlanTextRoundTripsWithThePipeline) {
  const Plan p = Plan::parse("uniform:tp1d(t=8,sp=1,recompute=sel)@pp(p=4,m=16,schedule=interleaved,v=2,split=7/5/6/6)", 48);
  EXPECT_EQ(p.pipeline.stages, 4);
  EXPECT_EQ(p.pipeline.micro_batches, 16);
  EXPECT_EQ(p.pipeline.virtual_stages, 2);
  EXPECT_TRUE(p.blocks[0].selective);
  EXPECT_EQ(Plan::parse(p.to_string(), 48), p);
  const std::vector<int> st = p.block_stages();
  EXPECT_EQ(st[13], 0);
  EXPECT_EQ(st[14], 1);
  EXPECT_EQ(st[47], 3);
  EXPECT_THROW(Plan::parse("uniform:dp@pp(p=2,v=2)", 48), std::invalid_argument);  // v needs interleaved
  EXPECT_THROW(Plan::parse("uniform:dp@pp(p=2,split=3)", 48), std::invalid_argument);
  EXPECT_THROW(Plan::parse("uniform:dp@pp(p=2,bogus=1)", 48), std::invalid_argument);
}

TEST(PipelineModel, ValidateNamesWhatDoesNotDivide) {
  ModelSpec m = gpt(24, 2048, 16, 2048, 1);
  m.global_batch = 16;
  Plan p = Plan::parse("uniform:tp1d(t=4)@pp(p=3,m=4)", 48);
  EXPECT_NE(p.validate(m, 16).find("p=3 does not divide"), std::string::npos);
  p = Plan::parse("uniform:tp1d(t=4)@pp(p=2,m=3)", 48);
  EXPECT_NE(p.validate(m, 16).find("m=3 micro-batches do not divide"), std::string::npos);
  p = Plan::parse("uniform:tp1d(t=4)@pp(p=2,m=4,split=20/5)", 48);
  EXPECT_NE(p.validate(m, 16).find("split adds up to 25"), std::string::npos);
  p = Plan::parse("uniform:tp1d(t=4)@pp(p=2,m=4)", 48);
  EXPECT_EQ(p.validate(m, 16), "");
  // Megatron's rule for m: G / (micro_batch · DP), DP = (P/p) / t.
  p.pipeline.micro_batches = 0;
  EXPECT_EQ(plan_micro_batches(p, m, 16), 16 / (1 * (8 / 4)));
}

// With one stage, one micro-batch and the new terms off, the iteration is what the model
// before pipelines charged: Σ blocks (fwd + bwd + comm + grad sync) + redistribution + head.
TEST(PipelineModel, OneStageOneMicroBatchTermsOffIsTheSumOfBlocks) {
  ExperimentSpec spec =
      h100_spec(gpt(4, 2048, 16, 1024, 8), 16, 2, "uniform:tp1d(t=8)@pp(m=1)");
  const ModelSpec& m = spec.model;
  SimOptions o;
  o.terms.memory_bound = false;
  SimRun run(spec, o);
  const auto meas = run.estimate(run.plan());
  ASSERT_TRUE(meas && meas->ok);
  const CostModel& cm = run.stage_cost_model(0);
  double sum = 0;
  for (int b = 0; b < m.num_blocks(); ++b) {
    const BlockCost c = cm.block_cost(ModelSpec::block_kind(b), run.plan().blocks[b]);
    sum += c.fwd_s + c.bwd_s + c.comm_s + c.grad_sync_s;
  }
  const HeadCost h = cm.head_cost();
  const double redist = cm.redistribution(run.plan().blocks.back(), Strategy::dp()).time_s;
  EXPECT_NEAR(meas->step_latency_s, sum + h.compute_s + h.grad_sync_s + redist, 1e-12);
}

TEST(PipelineModel, MicroBatchesHoldOneMicroBatchOfActivations) {
  ExperimentSpec spec =
      h100_spec(gpt(8, 4096, 32, 2048, 1), 32, 1, "uniform:tp1d(t=8)@pp(m=1)");
  SimRun one(spec);
  spec.initial_plan = "uniform:tp1d(t=8)@pp(m=8)";
  SimRun eight(spec);
  const auto a = one.estimate(one.plan()), b = eight.estimate(eight.plan());
  ASSERT_TRUE(a && b && a->ok && b->ok);
  // Same work; activations of 1/8 of the batch at a time, so less memory.
  EXPECT_LT(b->peak_memory_bytes[0], a->peak_memory_bytes[0]);
  EXPECT_NEAR(b->step_latency_s / a->step_latency_s, 1.0, 0.25);
}

// Under GPipe every micro-batch's forward runs before any backward, so the last stage holds
// m micro-batches of its blocks' activations and of the LM head's (fp32 logits), as the live
// ranks do (runtime/core/live_memory.cpp); under 1F1B it holds one of each.
TEST(PipelineModel, GPipesLastStageHoldsEveryMicroBatchsLogits) {
  ExperimentSpec spec =
      h100_spec(gpt(4, 2048, 16, 1024, 1), 16, 2, "uniform:tp1d(t=8)@pp(p=2,m=4)");
  const ModelSpec& m = spec.model;
  SimRun one_f_one_b(spec);
  spec.initial_plan = "uniform:tp1d(t=8)@pp(p=2,m=4,schedule=gpipe)";
  SimRun gpipe(spec);
  const auto a = one_f_one_b.estimate(one_f_one_b.plan()), b = gpipe.estimate(gpipe.plan());
  ASSERT_TRUE(a && b && a->ok && b->ok);
  const CostModel& cm = gpipe.stage_cost_model(1);  // rank 8 is on the last stage
  double blocks_act = 0;
  for (int blk = m.num_blocks() / 2; blk < m.num_blocks(); ++blk)
    blocks_act += cm.block_memory(ModelSpec::block_kind(blk), gpipe.plan().blocks[blk])
                      .activation_bytes;
  const ModelSpec& mm = cm.model();
  const double head_act = cm.head_cost().memory_bytes -
                          double(m.embedding_params()) * mm.state_bytes_per_param();
  ASSERT_GT(head_act, 0);
  EXPECT_NEAR(b->peak_memory_bytes[8] - a->peak_memory_bytes[8], 3 * (blocks_act + head_act),
              1e-6 * a->peak_memory_bytes[8]);
}

// A model with the live layers (runtime/core/live_memory.h) is priced as the live ranks hold
// it, stage by stage, whatever the calibration's memory scales say; the action mask then
// tries each entry on the whole plan.
TEST(PipelineModel, LiveLayersMemoryIsTheLiveRanksCount) {
  ExperimentSpec spec = h100_spec(gpt(4, 256, 4, 128, 1), 16, 1,
                                  "dp;dp(recompute=1);3*dp;dp(recompute=1);2*dp@pp(p=2,m=4,split=1/3)");
  spec.model.live_layers = true;
  spec.cluster.calibration.memory_state_scale = 0.5;  // not applied to the live layers
  spec.cluster.calibration.memory_base_bytes = 1e9;
  SimRun run(spec);
  const auto m = run.estimate(run.plan());
  ASSERT_TRUE(m && m->ok) << (m ? m->error : "");
  const std::vector<MemoryEstimate> stages =
      live_stage_memory_estimates(run.model(), run.plan(), 8, 4);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_NE(stages[0].total(), stages[1].total());
  for (int r = 0; r < 8; ++r)
    EXPECT_DOUBLE_EQ(m->peak_memory_bytes[r], stages[r / 4].total()) << "rank " << r;
  const std::vector<uint8_t> row = run.action_mask(0);
  EXPECT_GT(std::count(row.begin(), row.end(), uint8_t{1}), 0);
  spec.model.live_layers = false;  // Megatron-LM's layers: the scales and base apply
  SimRun megatron(spec);
  const auto g = megatron.estimate(megatron.plan());
  ASSERT_TRUE(g && g->ok);
  EXPECT_GT(g->peak_memory_bytes[0], 1e9);
}

// A device's stated workspace (DeviceType::workspace_bytes: the framework's cuBLAS
// workspaces) joins every rank's peak, on the live layers' count and on Megatron-LM's, and
// the memory check sees it: a capacity between a plan's peak without and with it refuses it.
TEST(PipelineModel, ADevicesWorkspaceJoinsEveryRanksPeak) {
  const std::string plan = "dp;dp(recompute=1);3*dp;dp(recompute=1);2*dp@pp(p=2,m=4,split=1/3)";
  for (const bool live : {true, false}) {
    ExperimentSpec spec = h100_spec(gpt(4, 256, 4, 128, 1), 16, 1, plan);
    spec.model.live_layers = live;
    const auto without = SimRun(spec).estimate(Plan::parse(plan, 8));
    ASSERT_TRUE(without && without->ok) << (without ? without->error : "");
    const double workspace = 64.0 * (1 << 20);
    for (DeviceType& d : spec.cluster.devices) d.workspace_bytes = workspace;
    SimRun run(spec);
    const auto with = run.estimate(run.plan());
    ASSERT_TRUE(with && with->ok) << (with ? with->error : "");
    for (int r = 0; r < 8; ++r)
      EXPECT_DOUBLE_EQ(with->peak_memory_bytes[r], without->peak_memory_bytes[r] + workspace)
          << (live ? "live layers" : "Megatron-LM's") << ", rank " << r;
    const double fullest =
        *std::max_element(without->peak_memory_bytes.begin(), without->peak_memory_bytes.end());
    for (DeviceType& d : spec.cluster.devices) d.memory_bytes = fullest + workspace / 2;
    SimRun tight(spec);
    EXPECT_FALSE(tight.fits(Plan::parse(plan, 8))) << "over capacity with its workspace";
    const auto over = tight.estimate(Plan::parse(plan, 8));
    ASSERT_TRUE(over);
    EXPECT_TRUE(over->oom);
    for (DeviceType& d : spec.cluster.devices) d.workspace_bytes = 0;
    EXPECT_TRUE(SimRun(spec).fits(Plan::parse(plan, 8))) << "fits without its workspace";
  }
}

TEST(PipelineModel, AStageBoundaryMovesAndStaysValid) {
  ExperimentSpec spec =
      h100_spec(gpt(8, 2048, 16, 1024, 1), 16, 2, "uniform:tp1d(t=8)@pp(p=2,m=8)");
  const ModelSpec& m = spec.model;
  SimRun run(spec);
  Plan plan = run.plan();
  plan.pipeline.split = {5, 3};  // one layer moved from stage 1 to stage 0
  ASSERT_EQ(plan.validate(m, 16), "");
  const auto even = run.estimate(run.plan()), moved = run.estimate(plan);
  ASSERT_TRUE(even && moved && even->ok && moved->ok);
  // Unbalanced stages: the slowest sets the pace.
  EXPECT_GT(moved->step_latency_s, even->step_latency_s);
  plan.pipeline.split = {8, 0};
  EXPECT_NE(plan.validate(m, 16), "");
  const auto bad = run.estimate(plan);
  ASSERT_TRUE(bad);
  EXPECT_FALSE(bad->ok);
}

// With stages, the word embedding (first stage) and its tied copy (last stage) are
// all-reduced between each pair of ranks after the flush (Megatron-LM's
// _allreduce_word_embedding_grads): V·h/t gradient values over the pair's link, here the
// network between the two nodes. One stage has no such pair.
TEST(PipelineModel, EmbeddingGradientsAllReduceBetweenFirstAndLastStage) {
  ModelSpec m = gpt(8, 2048, 16, 1024, 1);
  m.vocab_parallel = true;  // the embedding split over the vocabulary by the last block's t
  ExperimentSpec spec = h100_spec(m, 16, 2, "uniform:tp1d(t=8)@pp(p=2,m=8)");
  SimRun run(spec);
  const IterationBreakdown bd = run.breakdown(run.plan());
  const double bytes = double(m.vocab) * m.hidden / 8 * m.grad_bytes();
  const LinkState links = make_link_state(spec.cluster, std::vector<double>(spec.cluster.links.size(), 1.0));
  const double expected =
      collective_time(CollOp::kAllReduce, bytes, describe_group({0, 8}, links));
  EXPECT_GT(expected, 0);
  EXPECT_NEAR(bd.embedding_sync_s, expected, 1e-12);
  EXPECT_GE(bd.head_sync_s, bd.embedding_sync_s);
  spec.initial_plan = "uniform:tp1d(t=8)@pp(m=8)";
  SimRun flat(spec);
  EXPECT_EQ(flat.breakdown(flat.plan()).embedding_sync_s, 0);
}

// nccl-tests all_reduce_perf on 8 × A100 NVLink 3 (docs/published-runs.md, table C):
// the collective model with the link parameters of experiments/hardware.yaml.
TEST(CollectiveModel, ReproducesTheA100AllReduceSweepWithin15Percent) {
  LinkClass nv{"nvswitch-a100", 300e9, 5.7e-6, 10e-12};
  nv.bus_efficiency = 0.78;
  nv.bulk_latency_s = 12.5e-6;
  nv.bulk_bytes = 16.0 * (1 << 20);
  ClusterSpec c = cluster(1, 8, h100_sxm(), nv);
  c.nodes[0].intra_link = "nvswitch-a100";
  const LinkState ls = make_link_state(c, {1.0, 1.0});
  const GroupLinks g = describe_group({0, 1, 2, 3, 4, 5, 6, 7}, ls);
  const double mib = 1 << 20;
  const std::vector<std::pair<double, double>> sweep = {
      {1 * mib, 101.9e-6},    {4 * mib, 101.5e-6},    {8 * mib, 133.5e-6},
      {16 * mib, 276.6e-6},   {64 * mib, 684.6e-6},   {256 * mib, 2420.6e-6},
      {512 * mib, 4218.4e-6}, {1024 * mib, 8203.9e-6}, {4096 * mib, 32136e-6},
      {16384 * mib, 127997e-6}};
  for (const auto& [bytes, measured] : sweep) {
    const double t = collective_time(CollOp::kAllReduce, bytes, g);
    EXPECT_NEAR(t / measured, 1.0, 0.15) << bytes / mib << " MiB: " << t * 1e6 << " us";
  }
}

}  // namespace
}  // namespace shardgym
