// LiveRun with rank threads: measurements, repartition between steps, learning, invalid plans,
// failures; and the "shardgym/TPLive-v0" registration.
#include "runtime/live/driver/live_run.h"

#include <chrono>
#include <cstring>
#include <cmath>
#include <set>

#include <tuple>

#include <gtest/gtest.h>

#include "env/registry.h"
#include "runtime/live/comm/device.h"
#include "runtime/live/launch/group_sets.h"
#include "runtime/live/launch/thread_ranks.h"
#include "tests/live/live_test_spec.h"
#include "tests/live/thread_count.h"

namespace shardgym::live {
namespace {

TEST(LiveRun, TrainsMeasuresAndRepartitionsBetweenSteps) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  LiveRun run(spec);
  EXPECT_EQ(run.backend(), "live");
  EXPECT_FALSE(run.deterministic());
  EXPECT_FALSE(run.cloneable());
  EXPECT_FALSE(run.estimate(Plan::uniform(Strategy::dp(), 4)).has_value());
  const int blocks = run.model().num_blocks();
  const Plan a = Plan::uniform(Strategy::tp1d(2), blocks);
  const Plan b = Plan::parse("tp1d(t=4);dp;tp2d(d1=2,d2=2,first=row);tp1d(t=2,sp=1)", blocks);
  run.reset(1, a);
  EXPECT_EQ(run.plan(), a);
  std::vector<double> losses;
  for (int i = 0; i < 12; ++i) {
    const Plan& p = (i % 4 == 2) ? b : a;  // switch to b at 2, 6, 10 and back after
    const bool moves = p != run.plan();
    const Measurement m = run.step(p);
    ASSERT_TRUE(m.ok) << m.error;
    EXPECT_EQ(m.latency_source, "wallclock");
    EXPECT_EQ(m.memory_source, "allocator");
    EXPECT_TRUE(m.energy_source == "rapl" || m.energy_source == "model") << m.energy_source;
    EXPECT_GT(m.step_latency_s, 0);
    EXPECT_GT(m.energy_j, 0);
    EXPECT_EQ(m.tokens, 8.0 * 16);
    ASSERT_EQ(m.block_fwd_s.size(), size_t(blocks));
    ASSERT_EQ(m.block_bwd_s.size(), size_t(blocks));
    ASSERT_EQ(m.block_comm_s.size(), size_t(blocks));
    double inside = m.optimizer_s;
    for (int k = 0; k < blocks; ++k) {
      EXPECT_GT(m.block_fwd_s[k], 0);
      EXPECT_GT(m.block_bwd_s[k], 0);
      inside += m.block_fwd_s[k] + m.block_bwd_s[k] + m.block_comm_s[k];
    }
    // One rank's figures (fold_rank_reports): disjoint intervals of that rank's step, which
    // is the step latency. Maxima over the ranks, block by block, exceed it on 4 threads.
    EXPECT_GT(m.optimizer_s, 0);
    EXPECT_LE(inside, m.step_latency_s) << "step " << i << " (" << p.to_string() << ")";
    ASSERT_EQ(m.peak_memory_bytes.size(), 4u);
    for (double peak : m.peak_memory_bytes) EXPECT_GT(peak, 0);
    if (moves) {
      EXPECT_GT(m.repartition_bytes, 0) << "step " << i;
      EXPECT_GT(m.repartition_s, 0);
    } else {
      EXPECT_EQ(m.repartition_bytes, 0) << "step " << i;
    }
    EXPECT_TRUE(std::isfinite(m.loss));
    losses.push_back(m.loss);
    EXPECT_EQ(run.plan(), p);
  }
  // Byte-level LM from random init: loss starts near ln(256) = 5.55 and must drop whatever
  // the partitioning did. 12 AdamW steps at lr 1e-2 take it well below; 0.5 nats is a
  // margin far above step-to-step batch noise at this size.
  EXPECT_NEAR(losses.front(), std::log(256.0), 0.3);
  EXPECT_LT(losses.back(), losses.front() - 0.5);
  EXPECT_TRUE(std::isfinite(run.eval_loss(0)));
  EXPECT_EQ(run.context().step, 12);
}

// live.iterations / live.warmup_iterations: each env step trains warm-up + measured
// iterations (the loss shows it: 1 + 3 iterations per step drop it faster than 1 would), the
// repartition is the first iteration's, and the step says how many it measured and their spread.
TEST(LiveRun, SeveralIterationsPerStepReportMediansAndSpread) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  spec.live.warmup_iterations = 1;
  spec.live.iterations = 3;
  LiveRun run(spec);
  const int blocks = run.model().num_blocks();
  const Plan a = Plan::uniform(Strategy::tp1d(2), blocks);
  const Plan b = Plan::uniform(Strategy::dp(), blocks);
  run.reset(1, a);
  const Measurement m0 = run.step(a);
  ASSERT_TRUE(m0.ok) << m0.error;
  EXPECT_EQ(m0.iterations, 3);
  EXPECT_GE(m0.step_latency_spread, 0);
  EXPECT_EQ(m0.repartition_bytes, 0);
  const Measurement m1 = run.step(b);
  ASSERT_TRUE(m1.ok) << m1.error;
  EXPECT_GT(m1.repartition_bytes, 0);  // the first iteration's, not lost to the medians
  EXPECT_GT(m1.step_latency_s, 0);
  for (int k = 0; k < blocks; ++k) EXPECT_GT(m1.block_fwd_s[k], 0);
  EXPECT_EQ(run.context().step, 2);  // two env steps, eight iterations
  // Eight AdamW steps at lr 1e-2 move the loss further than two would.
  EXPECT_LT(m1.loss, std::log(256.0) - 0.3);
}

// A device the build or the machine cannot give is refused by the constructor, naming the
// keys, before any rank starts: CUDA in a CPU-only build or without a GPU, NCCL on the CPU.
// Calibration's microbenchmarks: three collectives on every group of two or more ranks the
// strategies form, then every pipeline's first stage boundary, timed on the ranks as they
// run (threads here; processes in live_process_test), one entry per (group, op).
TEST(LiveRun, TimesEveryCollectiveOnEveryGroup) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  LiveRun run(spec);
  EXPECT_THROW(run.time_collectives(4096, 3), std::logic_error);  // no ranks yet
  run.reset(1, Plan::uniform(Strategy::dp(), run.model().num_blocks()));
  EXPECT_THROW(run.time_collectives(2, 3), std::invalid_argument);
  EXPECT_THROW(run.time_collectives(4096, 0), std::invalid_argument);
  const auto timings = run.time_collectives(65536, 3);
  size_t groups = 0;
  for (const auto& set : standard_group_sets(4)) groups += set.size() >= 2;
  // Then the first stage boundary of each pipeline 4 ranks form: stages of 1 and of 2 ranks.
  ASSERT_EQ(timings.size(), 3 * groups + 2);
  std::set<std::vector<int>> seen;
  for (size_t i = 0; i < timings.size(); ++i) {
    const auto& t = timings[i];
    if (i < 3 * groups)
      EXPECT_TRUE(t.op == "all_reduce" || t.op == "all_gather" || t.op == "reduce_scatter") << t.op;
    else
      EXPECT_EQ(t.op, "p2p");
    EXPECT_GE(t.group.size(), 2u);
    EXPECT_EQ(t.bytes, 65536);
    EXPECT_TRUE(std::isfinite(t.seconds) && t.seconds > 0) << t.op << " " << t.seconds;
    if (t.op != "p2p") seen.insert(t.group);
  }
  EXPECT_EQ(seen.size(), groups);
  EXPECT_TRUE(seen.count({0, 1, 2, 3}));
  EXPECT_EQ(timings[3 * groups].group, (std::vector<int>{0, 1}));
  EXPECT_EQ(timings[3 * groups + 1].group, (std::vector<int>{0, 1, 2, 3}));
  // The run trains on afterwards.
  EXPECT_TRUE(run.step(Plan::uniform(Strategy::tp1d(4), run.model().num_blocks())).ok);
}

TEST(LiveRun, UnusableDevicesAreRejectedBeforeAnyRankStarts) {
  auto why = [](const std::string& device, const std::string& backend, int ranks) {
    ExperimentSpec spec = tiny_live_spec(ranks, "threads");
    spec.live.device = device;
    spec.live.backend = backend;
    try {
      LiveRun run(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(why("cpu", "nccl", 2).find("live.device / live.backend: backend nccl needs device cuda"),
            std::string::npos);
  const std::string cuda = why("cuda", "", 2);
  if (!built_with_cuda()) {
    EXPECT_NE(cuda.find("needs a CUDA build"), std::string::npos) << cuda;
  } else if (cuda_device_count() == 0) {
    EXPECT_NE(cuda.find("no CUDA device"), std::string::npos) << cuda;
  } else if (cuda_device_count() < 2) {
    EXPECT_NE(cuda.find("NCCL refuses two ranks on one GPU"), std::string::npos) << cuda;
  } else {
    EXPECT_EQ(cuda, "");
  }
}

TEST(LiveRun, InvalidPlansAreRejectedBeforeAnyRankSeesThem) {
  LiveRun run(tiny_live_spec(4, "threads"));
  const int blocks = run.model().num_blocks();
  // tp1d(t=3) does not divide 4 ranks; chunks=16 cannot split a global batch of 8.
  EXPECT_THROW(run.reset(0, Plan::uniform(Strategy::tp1d(3), blocks)), std::invalid_argument);
  EXPECT_FALSE(run.running()) << "no rank may start for an invalid initial plan";
  Strategy chunky = Strategy::tp1d(2);
  chunky.chunks = 16;
  EXPECT_NE(run.why_invalid(Plan::uniform(chunky, blocks)), "");
  run.reset(0, Plan::uniform(Strategy::dp(), blocks));
  const Measurement bad = run.step(Plan::uniform(chunky, blocks));
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("chunks=16"), std::string::npos) << bad.error;
  EXPECT_TRUE(run.running()) << "an invalid plan must not disturb the ranks";
  EXPECT_TRUE(run.step(Plan::uniform(Strategy::dp(), blocks)).ok);
}

TEST(LiveRun, ActionMaskFollowsTheCatalogAndTheBatch) {
  LiveRun run(tiny_live_spec(4, "threads"));
  const int blocks = run.model().num_blocks();
  run.reset(0, Plan::uniform(Strategy::dp(), blocks));
  for (int b = 0; b < blocks; ++b) {
    const auto mask = run.action_mask(b);
    ASSERT_EQ(mask.size(), size_t(run.catalog().size()));
    EXPECT_EQ(mask[run.catalog().index_of(Strategy::dp())], 1);
    for (int k = 0; k < run.catalog().size(); ++k) {
      Plan trial = run.plan();
      trial.blocks[b] = run.catalog().at(k);
      EXPECT_EQ(mask[k] == 1, run.why_invalid(trial).empty()) << run.catalog().at(k).to_string();
    }
  }
  EXPECT_THROW(run.action_mask(blocks), std::out_of_range);
}

TEST(LiveRun, ConfigurationErrorsNameTheKey) {
  auto expect_rejects = [](ExperimentSpec s, const std::string& needle) {
    try {
      LiveRun run(s);
      ADD_FAILURE() << "accepted; expected an error mentioning " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ExperimentSpec s = tiny_live_spec(4, "threads");
  s.live.ranks = 2;
  expect_rejects(s, "live.ranks");
  s = tiny_live_spec(4, "threads");
  s.live.precision = "bfloat16";
  expect_rejects(s, "live.precision");
  s = tiny_live_spec(4, "threads");
  s.model.vocab = 100;
  expect_rejects(s, "vocab");
  s = tiny_live_spec(4, "threads");
  s.live.extra.fault = "explode@1:2";
  expect_rejects(s, "fault");
  s.live.extra.fault = "exit@1:2";
  expect_rejects(s, "launch = processes");
  s.live.extra.fault = "nostart@4";
  expect_rejects(s, "outside live.ranks");
  s = tiny_live_spec(4, "processes");
  s.live.extra.fault = "nostart@1";
  expect_rejects(s, "launch = threads");
  // Llama's traits run live; rotary embeddings need pairs of features in a head.
  s = tiny_live_spec(4, "threads");
  s.model.set_llama_traits();
  s.model.heads = 32;  // head_dim 1
  s.model.kv_heads = 4;
  expect_rejects(s, "position: rotary needs an even head dimension");
}

// Every trait of Llama's blocks runs live (tests/live/model has their equivalence with the
// reference); GPT's model is accepted as before.
TEST(LiveRun, LlamaTraitsAreAccepted) {
  ModelSpec m = tiny_live_spec(4, "threads").model;
  EXPECT_EQ(why_model_not_live(m), "");
  m.set_llama_traits();
  m.kv_heads = 2;
  m.ffn = 48;
  EXPECT_EQ(why_model_not_live(m), "");
  m.tied_embeddings = true;
  EXPECT_EQ(why_model_not_live(m), "");
  m.heads = 32;
  EXPECT_NE(why_model_not_live(m), "");
}

// Llama's blocks end to end on 4 rank threads (h = 32, 8 heads in 4 query groups, head_dim
// 4, SwiGLU of 48, tied embeddings): every step trains, repartitions move parameters, the
// loss drops from ln(256).
TEST(LiveRun, TrainsLlamaBlocksAndRepartitions) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  spec.model.set_llama_traits();
  spec.model.heads = 8;
  spec.model.kv_heads = 4;
  spec.model.ffn = 48;
  spec.model.tied_embeddings = true;
  LiveRun run(spec);
  const int blocks = run.model().num_blocks();
  const Plan a = Plan::uniform(Strategy::tp1d(2), blocks);
  const Plan b = Plan::parse("tp2d(d1=2,d2=2,first=col);tp1d(t=4,sp=1);dp;tp1d(t=2,chunks=2)",
                             blocks);
  run.reset(1, a);
  std::vector<double> losses;
  for (int i = 0; i < 12; ++i) {
    const Plan& p = (i % 4 == 2) ? b : a;
    const bool moves = p != run.plan();
    const Measurement m = run.step(p);
    ASSERT_TRUE(m.ok) << m.error;
    if (moves) {
      EXPECT_GT(m.repartition_bytes, 0) << "step " << i;
    }
    EXPECT_TRUE(std::isfinite(m.loss));
    losses.push_back(m.loss);
  }
  EXPECT_NEAR(losses.front(), std::log(256.0), 0.3);
  EXPECT_LT(losses.back(), losses.front() - 0.5);
}

// The model's traits reach rank processes as sent (GPT's defaults and Llama's alike).
TEST(LiveRun, RankConfigCarriesTheModelsTraits) {
  LiveRankConfig c;
  c.model.set_llama_traits();
  c.model.kv_heads = 2;
  const LiveRankConfig back = LiveRankConfig::parse(c.serialize());
  EXPECT_EQ(back.model.kv_heads, 2);
  EXPECT_TRUE(back.model.rmsnorm && back.model.swiglu && back.model.rotary);
  EXPECT_FALSE(back.model.linear_bias || back.model.dropout || back.model.tied_embeddings);
  const LiveRankConfig gpt = LiveRankConfig::parse(LiveRankConfig().serialize());
  EXPECT_TRUE(gpt.model.linear_bias && gpt.model.dropout && !gpt.model.swiglu);
}

// A rank's report carries the optimizer step's time to the driver (rank processes send it as
// text), exactly.
// The block figures and the optimizer step come from the critical rank (the one whose step is
// the step latency), all from that one rank, even where another rank took longer in a block;
// a rank that reports no block times is not chosen, whatever its step.
TEST(LiveRun, FoldsTheCriticalRanksFiguresIntoTheMeasurement) {
  auto report = [](double step, std::vector<double> fwd, double comm0, double optimizer) {
    RankReport r;
    r.step_s = step;
    r.fwd_s = fwd;
    r.bwd_s = {2 * fwd[0], 2 * fwd[1]};
    r.comm_s = {comm0, 1e-4};
    r.optimizer_s = optimizer;
    r.peak_bytes = 1000 * step;
    r.repartition_bytes = 10;
    return r;
  };
  std::vector<RankReport> reports = {
      report(0.010, {1e-3, 1e-3}, 4e-3, 1e-3),  // computes longest, waits least
      report(0.012, {5e-4, 5e-4}, 6e-3, 2e-3),  // critical: woken first, waited longest
      report(0.011, {9e-4, 3e-3}, 1e-3, 1e-3),  // its block 1 took longest
  };
  RankReport untimed;
  untimed.step_s = 0.013;  // a slowest step, but no block times
  reports.push_back(untimed);
  Measurement m;
  fold_rank_reports(reports, 2, m);
  EXPECT_EQ(m.step_latency_s, 0.013);
  EXPECT_EQ(m.block_fwd_s, reports[1].fwd_s);
  EXPECT_EQ(m.block_bwd_s, reports[1].bwd_s);
  EXPECT_EQ(m.block_comm_s, reports[1].comm_s);
  EXPECT_EQ(m.optimizer_s, 2e-3);
  EXPECT_EQ(m.repartition_bytes, 30);  // summed over the ranks
  EXPECT_EQ(m.peak_memory_bytes.size(), 4u);
  reports.pop_back();
  fold_rank_reports(reports, 2, m);  // folding again starts from nothing
  EXPECT_EQ(m.step_latency_s, 0.012);
  EXPECT_EQ(m.repartition_bytes, 30);  // not 60
  EXPECT_EQ(m.peak_memory_bytes.size(), 3u);
  double inside = m.optimizer_s;
  for (int b = 0; b < 2; ++b) inside += m.block_fwd_s[b] + m.block_bwd_s[b] + m.block_comm_s[b];
  EXPECT_LE(inside, m.step_latency_s);
}

// Every field of a report survives the text form exactly (a field the writer's or the
// reader's table leaves out comes back at its default).
TEST(LiveRun, RankReportsRoundTripEveryField) {
  // In declaration order: seq, rank, ok, error, loss, step_s, repartition_s,
  // repartition_bytes, repartition_peak_bytes, blocks_changed, busy_s, peak_bytes, fwd_s,
  // bwd_s, comm_s, optimizer_s.
  const RankReport r{7,    3,      false, "rank 3: line one\nline two", 2.25, 0.125, 0.0625,
                     4096, 8192,   5,     0.375, 1e9 + 1, {1e-3, 2e-3}, {3e-3, 4e-3},
                     {5e-4, 6e-4}, 0.0021234567890123456};
  auto fields = [](const RankReport& x) {
    return std::tie(x.seq, x.rank, x.ok, x.error, x.loss, x.step_s, x.repartition_s,
                    x.repartition_bytes, x.repartition_peak_bytes, x.blocks_changed, x.busy_s,
                    x.peak_bytes, x.fwd_s, x.bwd_s, x.comm_s, x.optimizer_s);
  };
  EXPECT_EQ(fields(RankReport::parse(r.serialize())), fields(r)) << r.serialize();
}

// Micro-batches travel in the step command. An m that no plan can take (it must divide each
// rank's G/P sequences) is refused by the setter; one whose micro-batch a block's chunks
// cannot split fails that step before any rank sees it, and the mask leaves that strategy
// out. Trained from one seed, 2 micro-batches per iteration give the whole batch's losses.
TEST(LiveRun, MicroBatchesReachTheStepCommandAndThoseThatDoNotSplitAreRefused) {
  RankCommand cmd;
  cmd.op = RankOp::kStep;
  cmd.plan = "uniform:dp";
  cmd.micro_batches = 4;
  EXPECT_NE(cmd.serialize().find("\nmicro_batches=4\n"), std::string::npos) << cmd.serialize();
  EXPECT_EQ(RankCommand::parse(cmd.serialize()).micro_batches, 4);
  EXPECT_EQ(RankCommand().micro_batches, 1);

  ExperimentSpec spec = tiny_live_spec(4, "threads");  // G = 8: 2 sequences per rank
  spec.live.precision = "float64";  // losses compared below to rounding of float64
  spec.model.micro_batch = 8;       // the model asks for no micro-batching; the run sets m
  LiveRun whole(spec), micro(spec);
  EXPECT_EQ(micro.micro_batches(), 0);  // none set: Megatron-LM's rule, m = 1 at micro_batch = G
  EXPECT_EQ(micro.micro_batches_of(Plan::uniform(Strategy::tp1d(2), spec.model.num_blocks())), 1);
  for (int bad : {0, 4}) {
    try {
      micro.set_micro_batches(bad);
      ADD_FAILURE() << "micro_batches = " << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("micro_batches = " + std::to_string(bad)), std::string::npos) << what;
      if (bad == 4) {
        EXPECT_NE(what.find("local batch of 2 sequences"), std::string::npos) << what;
      }
    }
  }
  EXPECT_EQ(micro.micro_batches(), 0);
  micro.set_micro_batches(2);
  EXPECT_EQ(micro.micro_batches(), 2);

  const int blocks = micro.model().num_blocks();
  const Plan a = Plan::uniform(Strategy::tp1d(2), blocks);
  Strategy dp_chunks = Strategy::dp();
  dp_chunks.chunks = 2;  // 2 rows per rank: 2 chunks of 1, but 1 row per micro-batch
  const Plan chunky = Plan::uniform(dp_chunks, blocks);
  whole.reset(5, a);
  micro.reset(5, a);
  const int k = micro.catalog().index_of(dp_chunks);
  ASSERT_GE(k, 0);
  EXPECT_EQ(whole.action_mask(0)[k], 1);
  EXPECT_EQ(micro.action_mask(0)[k], 0);
  EXPECT_EQ(whole.why_invalid(chunky), "");
  const Measurement bad = micro.step(chunky);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("micro_batches = 2: block 0 (dp(chunks=2)) takes 1 sequences"),
            std::string::npos)
      << bad.error;
  EXPECT_TRUE(micro.running()) << "a refused m must not disturb the ranks";
  // The interleaved schedule is the simulator's alone: refused, not run as plain 1F1B.
  const std::string pp = micro.why_invalid(
      Plan::parse("uniform:tp1d(t=2)@pp(p=2,m=2,schedule=interleaved,v=1)", blocks));
  EXPECT_NE(pp.find("schedule=interleaved is priced by the simulator only"), std::string::npos)
      << pp;
  // float64, 3 AdamW steps: the two runs differ only in the order of the sums (~1e-16).
  for (int i = 0; i < 3; ++i) {
    const Measurement mw = whole.step(a), mm = micro.step(a);
    ASSERT_TRUE(mw.ok) << mw.error;
    ASSERT_TRUE(mm.ok) << mm.error;
    EXPECT_NEAR(mm.loss, mw.loss, 1e-9 * mw.loss) << "step " << i;
    for (int b = 0; b < blocks; ++b) EXPECT_GT(mm.block_fwd_s[b], 0);
  }
  // A plan's own micro-batch count is run as the simulator runs it, whatever the run's
  // setting: `whole` (m = 1) refuses dp(chunks=2) at @pp(m=2) as `micro` does at m = 2, and
  // steps a@pp(m=2) as `micro` steps a.
  Plan a_m2 = a, chunky_m2 = chunky;
  a_m2.pipeline.micro_batches = chunky_m2.pipeline.micro_batches = 2;
  EXPECT_EQ(whole.micro_batches_of(a), 1);
  EXPECT_EQ(whole.micro_batches_of(a_m2), 2);
  EXPECT_NE(whole.why_invalid(chunky_m2).find("micro_batches = 2: block 0 (dp(chunks=2))"),
            std::string::npos)
      << whole.why_invalid(chunky_m2);
  const Measurement mw = whole.step(a_m2), mm = micro.step(a);
  ASSERT_TRUE(mw.ok) << mw.error;
  ASSERT_TRUE(mm.ok) << mm.error;
  EXPECT_NEAR(mw.loss, mm.loss, 1e-9 * mm.loss);
}

// Pipeline stages on the live ranks (runtime/live/tp/pipeline.cpp): from one seed, a 2-stage
// 1F1B plan, a boundary move and a GPipe plan train the losses of the same blocks without
// stages; every block is timed by the ranks of its stage, and each stage's ranks report
// their own peak memory, within the estimate's reach.
TEST(LiveRun, PipelinedPlansTrainTheLossesOfOneStage) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  spec.live.precision = "float64";
  spec.model.layers = 4;
  const int blocks = spec.model.num_blocks();
  const std::string one = "uniform:tp1d(t=2)@pp(m=2)";
  const std::vector<Measurement> g = expect_losses_of_one_stage(
      spec,
      two_stage_plans("uniform:dp@pp(p=2,m=2,split=3/1,schedule=gpipe)"),
      {one, one, "uniform:dp@pp(m=2)"});
  for (size_t i = 0; i < g.size(); ++i) {
    for (int b = 0; b < blocks; ++b) EXPECT_GT(g[i].block_fwd_s[b], 0) << "block " << b;
    ASSERT_EQ(g[i].peak_memory_bytes.size(), 4u);
    if (i == 1) {
      EXPECT_GT(g[i].repartition_bytes, 0);  // the boundary moved a layer
    }
  }
}

// model.micro_batch as Megatron-LM's (docs/configs.md, "Micro-batches"): with G = 8 over 4
// ranks and micro_batch 2, a plan runs G / (2 · DP) micro-batches, as the simulator counts
// them; one the embedding's 2 sequences per rank cannot split is refused with the numbers.
TEST(LiveRun, MicroBatchIsMegatronsWithoutAnySetting) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  spec.model.micro_batch = 2;
  LiveRun run(spec);
  const int blocks = run.model().num_blocks();
  const Plan dp = Plan::uniform(Strategy::dp(), blocks);
  const Plan tp2 = Plan::uniform(Strategy::tp1d(2), blocks);
  const Plan tp4 = Plan::uniform(Strategy::tp1d(4), blocks);
  EXPECT_EQ(run.micro_batches_of(dp), 1);   // 4 replicas of 2 sequences
  EXPECT_EQ(run.micro_batches_of(tp2), 2);  // 2 replicas of 4
  EXPECT_EQ(run.micro_batches_of(tp4), 4);  // 1 replica of 8
  for (const Plan& p : {dp, tp2, tp4})
    EXPECT_EQ(run.micro_batches_of(p), plan_micro_batches(p, spec.model, 4)) << p.to_string();
  EXPECT_EQ(run.why_invalid(tp2), "");
  const std::string why = run.why_invalid(tp4);
  EXPECT_NE(why.find("micro_batches = 4 does not divide the local batch of 2 sequences"),
            std::string::npos)
      << why;
}

using testing::thread_count;

TEST(LiveRun, ThrowingRankEndsTheStepWithItsNameAndTheRunStops) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  spec.live.extra.fault = "throw@2:1";
  LiveRun run(spec);
  const int threads_before = thread_count();
  const int blocks = run.model().num_blocks();
  run.reset(0, Plan::uniform(Strategy::tp1d(4), blocks));
  ASSERT_TRUE(run.step(run.plan()).ok);
  const auto t0 = std::chrono::steady_clock::now();
  const Measurement m = run.step(run.plan());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.error.find("rank 2 failed: step (command 3): injected fault"), std::string::npos)
      << m.error;
  EXPECT_LT(s, spec.live.timeout_s) << "peers must stop on the closed sockets: " << m.error;
  EXPECT_FALSE(run.running());
  EXPECT_EQ(thread_count(), threads_before) << "every rank thread is joined";
  const Measurement after = run.step(run.plan());
  EXPECT_FALSE(after.ok);
  EXPECT_NE(after.error.find("stopped"), std::string::npos) << after.error;
  run.reset(1, Plan::uniform(Strategy::dp(), blocks));  // a reset starts fresh ranks
  EXPECT_TRUE(run.step(run.plan()).ok);
}

// A rank thread that stops taking part is named as the root cause — not the peers whose
// collectives timed out on it — within timeout_s plus the grace, and every thread is joined.
// (The stall used to be refused for rank threads: nothing could end it.)
TEST(LiveRun, AStalledRankThreadIsNamedWithinTheTimeoutPlusGrace) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  spec.live.timeout_s = 1.5;
  spec.live.extra.fault = "stall@1:1";
  LiveRun run(spec);
  const int threads_before = thread_count();
  run.reset(0, Plan::uniform(Strategy::tp1d(4), run.model().num_blocks()));
  ASSERT_TRUE(run.step(run.plan()).ok);
  const auto t0 = std::chrono::steady_clock::now();
  const Measurement m = run.step(run.plan());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.error.find("live step 1: rank 1 stalled: no answer to step (command 3)"), 0u)
      << m.error;
  EXPECT_LT(s, spec.live.timeout_s + kEndGraceS) << m.error;
  EXPECT_EQ(thread_count(), threads_before) << "every rank thread is joined";
}

// The same in a pipeline: a rank of either stage that stalls, or throws, ends the step with
// its name within the timeout (plus the grace for a stall), and every rank thread is joined.
TEST(LiveRun, AFailingRankOfAnyPipelineStageIsNamed) {
  for (const char* fault : {"stall@0:1", "stall@3:1", "throw@1:1", "throw@2:1"}) {
    ExperimentSpec spec = tiny_live_spec(4, "threads");
    spec.model.layers = 4;
    spec.live.timeout_s = 1.5;
    spec.live.extra.fault = fault;
    LiveRun run(spec);
    const int threads_before = thread_count();
    run.reset(0, Plan::parse("uniform:tp1d(t=2)@pp(p=2,m=2)", run.model().num_blocks()));
    const Measurement first = run.step(run.plan());
    ASSERT_TRUE(first.ok) << fault << ": " << first.error;
    const auto t0 = std::chrono::steady_clock::now();
    const Measurement m = run.step(run.plan());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string rank = std::string("rank ") + std::strchr(fault, '@')[1];  // kind@rank:step
    const bool stall = fault[0] == 's';
    EXPECT_FALSE(m.ok) << fault;
    EXPECT_NE(m.error.find(rank + (stall ? " stalled" : " failed")), std::string::npos)
        << fault << ": " << m.error;
    EXPECT_LT(s, spec.live.timeout_s + (stall ? kEndGraceS : 0)) << fault << ": " << m.error;
    EXPECT_EQ(thread_count(), threads_before) << fault << ": every rank thread is joined";
  }
}

// A rank thread that cannot be created ends the reset with its name; the started ones are
// joined without waiting out any timeout.
TEST(LiveRun, AnUnstartableRankThreadEndsTheResetWithItsName) {
  ExperimentSpec spec = tiny_live_spec(4, "threads");
  spec.live.extra.fault = "nostart@3";
  LiveRun run(spec);
  const int threads_before = thread_count();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    run.reset(0, Plan::uniform(Strategy::dp(), run.model().num_blocks()));
    FAIL() << "reset succeeded without rank 3";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()).find("rank 3 failed: cannot start rank thread 3 of 4"), 0u)
        << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_EQ(thread_count(), threads_before);
  EXPECT_FALSE(run.running());
}

TEST(LiveEnv, IsRegisteredAndStepsThroughPartitionEnv) {
  ASSERT_TRUE(env_registered("shardgym/TPLive-v0"));
  ExperimentSpec spec = tiny_live_spec(2, "threads");
  spec.initial_plan = "uniform:dp";
  auto env = make_bare_env("shardgym/TPLive-v0", spec);
  ASSERT_EQ(env->run().backend(), "live");
  env->reset(3);
  const auto mask = env->action_mask();
  const int k = env->run().catalog().size();
  Action action(env->run().model().num_blocks(), 0);
  for (size_t b = 0; b < action.size(); ++b) {  // the last valid entry of every block
    for (int j = k - 1; j >= 0; --j) {
      if (mask[b * k + j]) {
        action[b] = j;
        break;
      }
    }
  }
  const StepResult r = env->step(action);
  EXPECT_FALSE(r.truncated);
  EXPECT_TRUE(std::isfinite(r.reward));
}

}  // namespace
}  // namespace shardgym::live
