// TraceWriter → TraceReader round trip: root attributes, the strategies table, every dataset
// of every episode, lazily appearing scalars, incomplete episodes, size checks, summaries.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "datasets/trace_reader.h"
#include "datasets/trace_summary.h"
#include "datasets/trace_writer.h"
#include "tests/datasets/trace_fixtures.h"

namespace shardgym {
namespace {

using namespace tracetest;

class TraceRoundTrip : public ScratchTest {};

TEST_F(TraceRoundTrip, EveryDatasetReadsBackExactly) {
  const int dim = 9;
  {
    TraceWriter w(path("t.h5"), metadata());
    write_episodes(w, 0, 3, dim);
    EXPECT_EQ(w.episodes_completed(), 3);
  }
  TraceReader r(path("t.h5"));
  const TraceAttributes& a = r.attributes();
  EXPECT_EQ(a.format, "shardgym-trace");
  EXPECT_EQ(a.version, 1);
  EXPECT_EQ(a.env_id, "shardgym/TPTest-v0");
  EXPECT_EQ(a.config, metadata().config);
  EXPECT_EQ(a.git_sha, "0123abcd");
  EXPECT_EQ(a.created.size(), 20u) << a.created;  // 2024-05-01T12:34:56Z
  EXPECT_NE(a.host.find("CPUs"), std::string::npos) << a.host;
  // The table starts with the seeded entry; the others in order of first use.
  ASSERT_FALSE(r.strategies().empty());
  EXPECT_EQ(r.strategies()[0], "dp");
  EXPECT_EQ(r.strategies().size(), strategy_texts().size());
  ASSERT_EQ(r.episodes().size(), 3u);
  EXPECT_EQ(r.complete_episodes(), 3);
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(r.episodes()[e].name, "episode_" + std::to_string(e));
    EXPECT_EQ(r.episodes()[e].steps, steps_of(e));
    expect_episode(r.read_episode(e), r.strategies(), e, dim);
  }
}

TEST_F(TraceRoundTrip, CatalogSeededTableMakesIdsCatalogIndices) {
  TraceMetadata meta = metadata();
  meta.strategies = strategy_texts();
  {
    TraceWriter w(path("t.h5"), meta);
    write_episodes(w, 0, 1, 3);
  }
  TraceReader r(path("t.h5"));
  EXPECT_EQ(r.strategies(), strategy_texts());
  const TraceEpisode ep = r.read_episode(0);
  for (int t = 0; t < ep.steps(); ++t) {
    for (int b = 0; b < kBlocks; ++b) {
      EXPECT_EQ(r.strategies()[ep.plans[t * kBlocks + b]], strategy_at(0, t, b));
    }
  }
}

TEST_F(TraceRoundTrip, EpisodeOpenAtCloseIsListedIncomplete) {
  {
    TraceWriter w(path("t.h5"), metadata());
    write_episodes(w, 0, 1, 4);
    w.begin_episode(env_spec(), 7, reset_result(1, 4));
    w.record_step(action(1, 0), step_result(1, 0, 4));
    EXPECT_TRUE(w.episode_open());
  }  // destroyed with the episode open
  TraceReader r(path("t.h5"));
  ASSERT_EQ(r.episodes().size(), 2u);
  EXPECT_TRUE(r.episodes()[0].complete);
  EXPECT_FALSE(r.episodes()[1].complete);
  EXPECT_EQ(r.episodes()[1].seed, 7u);
  EXPECT_EQ(r.complete_episodes(), 1);
  try {
    r.read_episode(1);
    FAIL() << "reading an incomplete episode must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("incomplete"), std::string::npos) << e.what();
  }
  EXPECT_THROW(r.read_episode(5), std::runtime_error);
}

TEST_F(TraceRoundTrip, BeginWhileOpenEndsThePreviousEpisode) {
  {
    TraceWriter w(path("t.h5"), metadata());
    w.begin_episode(env_spec(), 100, reset_result(0, 4));
    w.record_step(action(0, 0), step_result(0, 0, 4));
    w.begin_episode(env_spec(), 101, reset_result(1, 4));  // a reset cut episode 0 short
    w.end_episode();
    w.end_episode();  // nothing open: no-op
  }
  TraceReader r(path("t.h5"));
  ASSERT_EQ(r.complete_episodes(), 2);
  EXPECT_EQ(r.read_episode(0).steps(), 1);
  EXPECT_EQ(r.read_episode(1).steps(), 0);
  EXPECT_EQ(r.read_episode(1).observations.size(), 4u) << "N + 1 = 1 observation row";
}

TEST_F(TraceRoundTrip, MismatchedSizesAreRejected) {
  TraceWriter w(path("t.h5"), metadata());
  w.begin_episode(env_spec(), 1, reset_result(0, 4));
  EXPECT_THROW(w.record_step(action(0, 0), step_result(0, 0, 5)), std::invalid_argument);
  Action short_action = action(0, 0);
  short_action.pop_back();
  EXPECT_THROW(w.record_step(short_action, step_result(0, 0, 4)), std::invalid_argument);
  StepResult wide = step_result(0, 0, 4);
  wide.info.measurement.block_fwd_s.push_back(1.0);
  EXPECT_THROW(w.record_step(action(0, 0), wide), std::invalid_argument);
  EXPECT_THROW(w.record_step(action(0, 0),
                             [] {
                               StepResult s = step_result(0, 0, 4);
                               s.info.measurement.peak_memory_bytes.resize(kWorld + 1);
                               return s;
                             }()),
               std::invalid_argument);
  // A rejected step wrote nothing; a good one still goes through.
  w.record_step(action(0, 0), step_result(0, 0, 4));
  w.end_episode();
  EXPECT_THROW(w.record_step(action(0, 1), step_result(0, 1, 4)), std::logic_error);
  w.close();
  EXPECT_THROW(w.begin_episode(env_spec(), 1, reset_result(0, 4)), std::logic_error);
  TraceReader r(path("t.h5"));
  EXPECT_EQ(r.read_episode(0).steps(), 1);
}

TEST_F(TraceRoundTrip, FailedStepsAndUnmeasuredVectors) {
  {
    TraceMetadata meta = metadata();
    meta.world = 0;  // taken from the reset measurement
    TraceWriter w(path("t.h5"), meta);
    w.begin_episode(env_spec(), 3, reset_result(0, 4));
    w.record_step(action(0, 0), step_result(0, 0, 4));
    StepResult failed = step_result(0, 1, 4);
    failed.truncated = true;
    failed.info.measurement = Measurement();
    failed.info.measurement.ok = false;
    failed.info.measurement.error = "rank 2: all_reduce timed out";
    failed.info.error = failed.info.measurement.error;
    failed.info.plan = Plan();  // nothing in force reported
    w.record_step(action(0, 1), failed);
    w.end_episode();
  }
  TraceReader r(path("t.h5"));
  const TraceEpisode ep = r.read_episode(0);
  EXPECT_EQ(ep.world, kWorld);
  EXPECT_EQ(ep.info.error, "rank 2: all_reduce timed out");
  EXPECT_EQ(ep.info.error_step, 1);
  const Measurement m = ep.measurement(1);
  EXPECT_FALSE(m.ok);
  EXPECT_EQ(m.error, "rank 2: all_reduce timed out");
  for (double v : m.block_fwd_s) EXPECT_TRUE(std::isnan(v)) << "unmeasured entries are NaN";
  for (double v : m.peak_memory_bytes) EXPECT_TRUE(std::isnan(v));
  for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(ep.plans[kBlocks + b], -1);
  EXPECT_THROW(ep.plan(1, r.strategies()), std::runtime_error);
  EXPECT_TRUE(ep.measurement(0).ok);
  EXPECT_EQ(ep.latency_source, "model,wallclock") << "distinct sources, joined";
}

TEST_F(TraceRoundTrip, WorldMustBeKnown) {
  TraceMetadata meta = metadata();
  meta.world = 0;
  TraceWriter w(path("t.h5"), meta);
  ResetResult r = reset_result(0, 4);
  r.info.measurement.peak_memory_bytes.clear();
  EXPECT_THROW(w.begin_episode(env_spec(), 1, r), std::invalid_argument);
}

TEST_F(TraceRoundTrip, CreateFailureNamesThePath) {
  try {
    TraceWriter w(path("no/such/dir/t.h5"), metadata());
    FAIL() << "creating a file in a missing directory must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir/t.h5"), std::string::npos) << e.what();
  }
}

TEST_F(TraceRoundTrip, SummaryTextAndJson) {
  {
    TraceWriter w(path("t.h5"), metadata());
    write_episodes(w, 0, 2, 5);
    w.begin_episode(env_spec(), 9, reset_result(2, 5));  // left open
  }
  const TraceSummary s = summarize_trace(path("t.h5"));
  EXPECT_EQ(s.schema_version, 1);
  EXPECT_EQ(s.complete_episodes(), 2);
  ASSERT_EQ(s.episodes.size(), 3u);
  EXPECT_EQ(s.total_steps(), steps_of(0) + steps_of(1));
  EXPECT_EQ(s.num_blocks, kBlocks);
  EXPECT_EQ(s.world, kWorld);
  EXPECT_EQ(s.obs_dim, 5);
  double ret0 = 0;
  for (int t = 0; t < steps_of(0); ++t) ret0 += step_result(0, t, 5).reward;
  EXPECT_DOUBLE_EQ(s.episodes[0].episode_return, ret0);
  EXPECT_TRUE(s.episodes[0].terminated);
  EXPECT_TRUE(s.episodes[1].truncated);
  EXPECT_DOUBLE_EQ(s.episodes[1].max_peak_memory_bytes, 1e9 * kWorld + (steps_of(1) - 1) * 1e3 + 1);
  EXPECT_FALSE(s.episodes[2].info.complete);

  const std::string text = describe_trace(s);
  EXPECT_NE(text.find("shardgym-trace v1"), std::string::npos) << text;
  EXPECT_NE(text.find("2 complete, 1 incomplete"), std::string::npos) << text;
  EXPECT_NE(text.find("episode_2"), std::string::npos) << text;
  EXPECT_NE(text.find("incomplete (the writer stopped"), std::string::npos) << text;

  const std::string json = to_json(s);
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"complete_episodes\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"config\": \"name: trace-test\\nmodel: {layers: 2}\\n\""),
            std::string::npos)
      << json;
  EXPECT_EQ(describe_trace(path("t.h5")), text);
}

}  // namespace
}  // namespace shardgym
