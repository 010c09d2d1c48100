#include "agents/ppo.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "agents/checkpoint_file.h"
#include "agents/evaluate.h"
#include "agents/polished.h"
#include "env/vector_env.h"
#include "runtime/core/training_run.h"
#include "tests/agents/agent_test_util.h"

namespace shardgym {
namespace {

// The tiny scenario: 2 layers (4 blocks) on 4 simulated GPUs, 16-step episodes, reward
// normalised to Megatron (1.0 per step = as fast as Megatron).
ExperimentSpec tiny_scenario() {
  ExperimentSpec s = test_specs::tiny(/*layers=*/2, /*gpus_per_node=*/4, /*nodes=*/1);
  s.steps_per_episode = 16;
  return s;
}

VectorEnv vector_env(const ExperimentSpec& spec, int n) {
  return VectorEnv(
      n, [spec](int) { return agent_tests::sim_env(spec); }, /*threads=*/1);
}

// A fresh agent of the same id (another seed) loaded from `ppo`'s checkpoint.
std::unique_ptr<PPO> through_checkpoint(const PPO& ppo, const EnvSpec& spec,
                                        const std::string& id) {
  const std::string file =
      (std::filesystem::temp_directory_path() / "shardgym_ppo_test_round_trip.ckpt").string();
  ppo.save(file);
  auto back = std::make_unique<PPO>(spec, PPOConfig::from_id(ParsedId::parse(id)), 99);
  back->load(file);
  std::remove(file.c_str());
  return back;
}

// `a` and `b`, out of training, take the same action on `env`'s first observation from seed
// 3; the reset's result.
ResetResult expect_same_first_action(PPO& a, PPO& b, Env& env) {
  a.set_training(false);
  b.set_training(false);
  const ResetResult start = env.reset(3);
  const std::vector<int32_t>& plan = start.info.plan_indices;
  const auto mask = env.action_mask();
  EXPECT_EQ(a.act(start.obs, mask, plan), b.act(start.obs, mask, plan));
  return start;
}

// The losses of `agent`'s updates (policy, value, entropy) over 2 updates on 2 envs of `spec`.
std::vector<double> update_losses(PPO& agent, const ExperimentSpec& spec) {
  VectorEnv e = vector_env(spec, 2);
  std::vector<double> out;
  for (const PPOUpdate& u : agent.train(e, 2 * 8 * 2).updates)
    out.insert(out.end(), {u.policy_loss, u.value_loss, u.entropy});
  return out;
}

// Trains `ppo` on `envs` for 2 updates of 8 steps, then starts run 1 (as the Trainer does
// when the evaluations stall, agents/trainer.h).
void train_to_a_restart(PPO& ppo, VectorEnv& envs) {
  int updates = 0;
  ppo.train_vectorized(envs, 2 * 8 * 2, [&](const TrainProgress&) { return ++updates > 0; });
  ASSERT_EQ(updates, 2);
  ppo.start_afresh(1);
  ASSERT_EQ(ppo.run(), 1);
}

class PPOTest : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

TEST_F(PPOTest, ConfigFromId) {
  PPOConfig c = PPOConfig::from_id(ParsedId::parse("ppo(lr=1e-3,rollout=32,hidden=8,ent=0)"));
  EXPECT_DOUBLE_EQ(c.lr, 1e-3);
  EXPECT_EQ(c.rollout, 32);
  EXPECT_EQ(c.hidden, 8);
  EXPECT_EQ(c.ent_coef, 0);
  EXPECT_EQ(c.epochs, 4);  // CleanRL defaults elsewhere
  EXPECT_DOUBLE_EQ(c.clip, 0.2);
  EXPECT_DOUBLE_EQ(c.gamma, 0.99);
  EXPECT_DOUBLE_EQ(c.lambda, 0.95);
  EXPECT_TRUE(c.block_ratio);
  EXPECT_TRUE(c.keep);
  PPOConfig clean = PPOConfig::from_id(ParsedId::parse("ppo(ratio=joint,keep=0)"));
  EXPECT_FALSE(clean.block_ratio);
  EXPECT_FALSE(clean.keep);
  EXPECT_FALSE(c.plan);
  EXPECT_DOUBLE_EQ(c.plan_p, 0.05);
  EXPECT_DOUBLE_EQ(c.plan_lr, 0.01);
  PPOConfig with_plan = PPOConfig::from_id(ParsedId::parse("ppo(plan=1,plan_p=0.2)"));
  EXPECT_TRUE(with_plan.plan);
  EXPECT_DOUBLE_EQ(with_plan.plan_p, 0.2);
  EXPECT_EQ(c.restart_s, 0);  // off by default
  EXPECT_DOUBLE_EQ(PPOConfig::from_id(ParsedId::parse("ppo(restart_s=10)")).restart_s, 10);
  EXPECT_EQ(c.polish, 0);  // off by default
  EXPECT_FALSE(c.norm_reward);  // off by default
  EXPECT_TRUE(PPOConfig::from_id(ParsedId::parse("ppo(norm_reward=1)")).norm_reward);
  EXPECT_EQ(PPOConfig::from_id(ParsedId::parse("ppo(polish=4)")).polish, 4);
  for (const char* bad :
       {"ppo(lr=0)", "ppo(rollout=0)", "ppo(gamma=2)", "ppo(rollout=2,minibatches=4)",
        "ppo(colour=red)", "ppo(clip=-1)", "ppo(ratio=sideways)", "ppo(decode=best)",
        "ppo(margin=-1)", "ppo(plan_p=0)", "ppo(plan_p=1)", "ppo(plan_lr=0)", "ppo(restart_s=-1)",
        "ppo(restart_s=inf)", "ppo(restart_s=soon)", "ppo(polish=-1)", "ppo(polish=1.5)",
        "ppo(polish_gain=1)", "ppo(polish_gain=-0.1)"}) {
    EXPECT_THROW(PPOConfig::from_id(ParsedId::parse(bad)), std::invalid_argument) << bad;
  }
}

TEST_F(PPOTest, GreedyModeIsDeterministicAndMasked) {
  auto env = agent_tests::sim_env(tiny_scenario());
  auto agent = make_agent("ppo(hidden=16)", env->spec(), 3);
  const ResetResult start = env->reset(0);
  const Observation& obs = start.obs;
  const std::vector<int32_t>& plan = start.info.plan_indices;
  agent->set_training(false);
  const auto mask = env->action_mask();
  Action a = agent->act(obs, mask, plan);
  EXPECT_EQ(agent->act(obs, mask, plan), a);
  EXPECT_TRUE(agents_detail::action_allowed(a, mask, env->spec().catalog_size));
  EXPECT_FALSE(agent->update());  // evaluation mode collects nothing
}

TEST_F(PPOTest, PreferenceDecodingKeepsTheEntryInForceWithinTheMargin) {
  auto env = agent_tests::sim_env(tiny_scenario());
  const ResetResult start = env->reset(0);
  const Observation& obs = start.obs;
  const std::vector<int32_t>& plan = start.info.plan_indices;
  const auto mask = env->action_mask();
  const int blocks = env->spec().num_blocks, catalog = env->spec().catalog_size;
  const Action current = agents_detail::current_action(plan, blocks);
  // An untrained policy's logits differ by far less than 1e6 nats: every block keeps.
  auto sticky = make_agent("ppo(hidden=16,decode=pref,margin=1e6)", env->spec(), 3);
  sticky->set_training(false);
  EXPECT_EQ(sticky->act(obs, mask, plan), current);
  // With no margin each block takes its preferred entry; some of the untrained preferences
  // differ from the entry in force (else this test shows nothing), and all are allowed.
  auto eager = make_agent("ppo(hidden=16,decode=pref,margin=0)", env->spec(), 3);
  eager->set_training(false);
  const Action a = eager->act(obs, mask, plan);
  EXPECT_NE(a, current);
  EXPECT_TRUE(agents_detail::action_allowed(a, mask, catalog));
}

TEST_F(PPOTest, ActsAndTrainsOnAPipelinedEnv) {
  ExperimentSpec spec = test_specs::pipelined(/*layers=*/8, /*stages=*/2);
  spec.steps_per_episode = 8;
  VectorEnv envs = vector_env(spec, 2);
  ASSERT_EQ(envs.spec().action_space.nvec.size(), 17u);
  PPO ppo(envs.spec(), PPOConfig::from_id(ParsedId::parse("ppo(rollout=8,hidden=8,keep_p=0.5)")),
          1);
  PPOTrainResult r = ppo.train(envs, 2 * 8 * 2);
  ASSERT_EQ(r.updates.size(), 2u);
  for (const PPOUpdate& u : r.updates) {
    EXPECT_TRUE(std::isfinite(u.policy_loss) && std::isfinite(u.value_loss));
    EXPECT_TRUE(std::isfinite(u.entropy) && u.entropy > 0);
  }
  auto env = agent_tests::sim_env(spec);
  agent_tests::Rollout out = agent_tests::rollout(*env, ppo, 0, 2, /*learn=*/true);
  EXPECT_EQ(out.invalid, 0);
  EXPECT_EQ(out.failed, 0);
  int moves = 0;
  for (const Action& a : out.actions) {
    ASSERT_EQ(a.size(), 17u);
    moves += a.back() != 0;
  }
  EXPECT_GT(moves, 0) << "keep_p=0.5: the sampled policy moves boundaries";
  ppo.set_training(false);
  const ResetResult start = env->reset(0);
  const Observation& obs = start.obs;
  const std::vector<int32_t>& plan = start.info.plan_indices;
  const auto mask = env->action_mask();
  EXPECT_TRUE(agents_detail::action_allowed(ppo.act(obs, mask, plan), mask, env->spec().catalog_size));
}

// Every attention block (even index) on one entry and every MLP block (odd) on one entry.
bool one_entry_per_kind(const Action& a, int blocks) {
  for (int b = 2; b < blocks; ++b)
    if (a[b] != a[b % 2]) return false;
  return true;
}

TEST_F(PPOTest, PlanMovesSetEveryBlockOfAKindAtOnce) {
  ExperimentSpec spec = test_specs::tiny(/*layers=*/4, /*gpus_per_node=*/4, /*nodes=*/1);
  spec.steps_per_episode = 16;  // 8 blocks: four of each kind
  auto env = agent_tests::sim_env(spec);
  const int blocks = env->spec().num_blocks;
  ASSERT_EQ(blocks, 8);
  // A plan move nearly every step: the sampled plan is one entry per kind, and it moves.
  auto mover = make_agent("ppo(hidden=16,plan=1,plan_p=0.999)", env->spec(), 4);
  agent_tests::Rollout out = agent_tests::rollout(*env, *mover, 0, 1, /*learn=*/true);
  ASSERT_EQ(out.actions.size(), 16u);
  EXPECT_EQ(out.invalid, 0);
  int changed = 0;
  for (size_t t = 0; t < out.actions.size(); ++t) {
    EXPECT_TRUE(one_entry_per_kind(out.actions[t], blocks)) << "step " << t;
    changed += t > 0 && out.actions[t] != out.actions[t - 1];
  }
  EXPECT_GT(changed, 8);
  // Without the plan rows, blocks sampled one by one (keep_p=0.5: half of them move each
  // step) leave the kinds split: the check above is not met by chance.
  auto blockwise = make_agent("ppo(hidden=16,plan=0,keep_p=0.5)", env->spec(), 4);
  agent_tests::Rollout single = agent_tests::rollout(*env, *blockwise, 0, 1, /*learn=*/true);
  int split = 0;
  for (const Action& a : single.actions) split += !one_entry_per_kind(a, blocks);
  EXPECT_GT(split, 8);
}

TEST_F(PPOTest, PlanRowsTrainWithAPipelineAndCheckpoint) {
  // Plan rows next to the pipeline row: rows padded to one width, the env's action is the
  // blocks' (+ pipeline) entries, training stays finite, a checkpoint restores the policy.
  ExperimentSpec spec = test_specs::pipelined(/*layers=*/8, /*stages=*/2);
  spec.steps_per_episode = 8;
  VectorEnv envs = vector_env(spec, 2);
  const std::string id = "ppo(rollout=8,hidden=8,plan=1,plan_p=0.5)";
  PPO ppo(envs.spec(), PPOConfig::from_id(ParsedId::parse(id)), 1);
  PPOTrainResult r = ppo.train(envs, 2 * 8 * 2);
  ASSERT_EQ(r.updates.size(), 2u);
  for (const PPOUpdate& u : r.updates)
    EXPECT_TRUE(std::isfinite(u.policy_loss) && std::isfinite(u.value_loss) &&
                std::isfinite(u.entropy) && std::isfinite(u.approx_kl));
  auto env = agent_tests::sim_env(spec);
  agent_tests::Rollout out = agent_tests::rollout(*env, ppo, 0, 1, /*learn=*/true);
  EXPECT_EQ(out.invalid, 0);
  for (const Action& a : out.actions) EXPECT_EQ(a.size(), 17u);
  std::unique_ptr<PPO> loaded = through_checkpoint(ppo, envs.spec(), id);
  const ResetResult start = expect_same_first_action(ppo, *loaded, *env);
  const auto mask = env->action_mask();
  EXPECT_TRUE(agents_detail::action_allowed(ppo.act(start.obs, mask, start.info.plan_indices),
                                            mask, env->spec().catalog_size));
}

std::vector<double> curve(uint64_t seed) {
  ExperimentSpec spec = tiny_scenario();
  VectorEnv envs = vector_env(spec, 2);
  PPO ppo(envs.spec(), PPOConfig::from_id(ParsedId::parse("ppo(rollout=16,hidden=16)")), seed);
  PPOTrainResult r = ppo.train(envs, 2 * 16 * 3);
  std::vector<double> out = r.episode_returns;
  for (const PPOUpdate& u : r.updates) {
    out.push_back(u.policy_loss);
    out.push_back(u.value_loss);
    out.push_back(u.entropy);
  }
  return out;
}

TEST_F(PPOTest, RestartSeedsDifferByRunAndSeed) {
  EXPECT_NE(restart_seed(7, 1), restart_seed(7, 2));
  EXPECT_NE(restart_seed(7, 1), restart_seed(8, 1));
  EXPECT_NE(restart_seed(7, 1), 7u);
}

// start_afresh(1) starts the run of the derived seed: the agent then learns exactly as a fresh
// PPO seeded restart_seed(5, 1) does, bit for bit; restart_s is what the Trainer reads.
TEST_F(PPOTest, AFreshRunLearnsAsAnAgentOfTheDerivedSeed) {
  ExperimentSpec spec = tiny_scenario();
  const PPOConfig cfg =
      PPOConfig::from_id(ParsedId::parse("ppo(rollout=8,hidden=8,restart_s=1e-9)"));
  VectorEnv envs = vector_env(spec, 2);
  PPO ppo(envs.spec(), cfg, 5);
  EXPECT_DOUBLE_EQ(ppo.restart_after_s(), 1e-9);
  EXPECT_EQ(ppo.vector_learner(), &ppo);
  EXPECT_THROW(ppo.start_afresh(0), std::invalid_argument);
  ASSERT_NO_FATAL_FAILURE(train_to_a_restart(ppo, envs));
  PPO fresh(envs.spec(), cfg, restart_seed(5, 1));
  auto losses = [&](PPO& agent) { return update_losses(agent, spec); };
  const std::vector<double> restarted = losses(ppo), from_seed = losses(fresh);
  ASSERT_FALSE(restarted.empty());
  EXPECT_EQ(restarted, from_seed);
  PPO unrestarted(envs.spec(), cfg, 5);
  EXPECT_NE(losses(unrestarted), from_seed);
}

// plan=alt: run 0 has no plan rows, run 1 (after the first restart) has them and is the run
// of a fresh ppo(plan=1) with the derived seed, bit for bit; a plan=alt agent loads the kept
// policy of either kind.
TEST_F(PPOTest, PlanAltAlternatesPlanRowsAcrossRestartsAndLoadsEither) {
  EXPECT_THROW(PPOConfig::from_id(ParsedId::parse("ppo(plan=alt)")), std::invalid_argument);
  EXPECT_THROW(PPOConfig::from_id(ParsedId::parse("ppo(plan=sometimes)")), std::invalid_argument);
  const PPOConfig alt =
      PPOConfig::from_id(ParsedId::parse("ppo(rollout=8,hidden=8,plan=alt,restart_s=1e-9)"));
  EXPECT_TRUE(alt.plan_alt);
  EXPECT_FALSE(alt.plan);
  ExperimentSpec spec = tiny_scenario();
  auto losses = [&](PPO& agent) { return update_losses(agent, spec); };
  const PPOConfig rows = PPOConfig::from_id(ParsedId::parse("ppo(rollout=8,hidden=8,plan=1)"));
  const PPOConfig none = PPOConfig::from_id(ParsedId::parse("ppo(rollout=8,hidden=8)"));
  {  // Before any restart: the run of ppo(plan=0).
    VectorEnv envs = vector_env(spec, 2);
    PPO first(envs.spec(), alt, 5), plain(envs.spec(), none, 5);
    EXPECT_EQ(losses(first), losses(plain));
  }
  VectorEnv envs = vector_env(spec, 2);
  PPO ppo(envs.spec(), alt, 5);
  ASSERT_NO_FATAL_FAILURE(train_to_a_restart(ppo, envs));
  const std::string file =
      (std::filesystem::temp_directory_path() / "shardgym_ppo_plan_alt_test.ckpt").string();
  ppo.save(file);  // run 1's policy, before any training of it: with plan rows
  PPO fresh(envs.spec(), rows, restart_seed(5, 1));
  const std::vector<double> restarted = losses(ppo);
  ASSERT_FALSE(restarted.empty());
  EXPECT_EQ(restarted, losses(fresh));
  PPO kept(envs.spec(), alt, 99);  // run 0: no plan rows until it loads
  kept.load(file);
  PPO again(envs.spec(), rows, 99);
  again.load(file);
  PPO without(envs.spec(), none, 99);
  EXPECT_THROW(without.load(file), std::runtime_error);
  std::remove(file.c_str());
  auto env = agent_tests::sim_env(spec);
  expect_same_first_action(kept, again, *env);
}

TEST_F(PPOTest, SameSeedSameLearningCurveBitForBit) {
  std::vector<double> a = curve(11), b = curve(11), c = curve(12);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);  // exact equality: bit for bit
  EXPECT_NE(a, c);
}

// Episode return of the greedy policy (mode of every block) on a fixed seed.
double greedy_return(Agent& agent, const ExperimentSpec& spec) {
  auto env = agent_tests::sim_env(spec);
  return run_episode(*env, agent, 1234, /*learn=*/false).total_reward;
}

TEST_F(PPOTest, ImprovesTheReturnOnATinyScenario) {
  const auto t0 = std::chrono::steady_clock::now();
  ExperimentSpec spec = tiny_scenario();
  VectorEnv envs = vector_env(spec, 4);
  PPO ppo(envs.spec(), PPOConfig::from_id(ParsedId::parse("ppo(rollout=32,lr=1e-3)")), 0);
  PPOTrainResult r = ppo.train(envs, 4 * 32 * 40);
  ASSERT_EQ(r.updates.size(), 40u);
  // Mean return of the episodes of the first and last five rollouts (stochastic policy).
  auto mean_of = [&](size_t from, size_t to) {
    double sum = 0;
    int n = 0;
    for (size_t i = from; i < to; ++i)
      if (r.updates[i].episodes > 0) sum += r.updates[i].mean_episode_return, ++n;
    return sum / std::max(n, 1);
  };
  const double early = mean_of(0, 5), late = mean_of(35, 40);
  std::printf("ppo tiny: early %.3f late %.3f (16 = Megatron every step), %.1f s\n", early, late,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_GT(late, early);
  // The greedy policy after training beats random plans (one per step, paying repartitions).
  auto random = make_agent("random", envs.spec(), 0);
  EXPECT_GT(greedy_return(ppo, spec), greedy_return(*random, spec));
}

// The plan of every step of one greedy episode.
std::vector<Action> greedy_plans(Agent& agent, const ExperimentSpec& spec, uint64_t seed) {
  auto env = agent_tests::sim_env(spec);
  std::vector<Action> plans;
  EpisodeHooks hooks;
  hooks.on_step = [&](const StepResult& r, const EpisodeSummary&) {
    plans.emplace_back(r.info.plan_indices.begin(), r.info.plan_indices.end());
  };
  run_episode(*env, agent, seed, /*learn=*/false, hooks);
  return plans;
}

// PPO inside the plan search (polish=N: make_ppo_agent returns agents/polished.h's agent).
std::unique_ptr<Agent> polished_ppo(const std::string& id, const EnvSpec& spec, uint64_t seed) {
  std::unique_ptr<Agent> agent = make_ppo_agent(ParsedId::parse(id), spec, seed);
  EXPECT_NE(dynamic_cast<Polished*>(agent.get()), nullptr) << id;
  return agent;
}

// Trains `agent` for one update (2 envs × 16 steps) and returns the notes of its progress
// (the plan search's), printed.
std::vector<std::string> one_update_of_two_envs(Agent& agent, VectorEnv& envs) {
  std::vector<std::string> notes;
  agent.vector_learner()->train_vectorized(envs, 2 * 16, [&](const TrainProgress& p) {
    notes.insert(notes.end(), p.notes.begin(), p.notes.end());
    return true;
  });
  for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  return notes;
}

// A fresh agent of the same id (another seed) loaded from `bytes`, written to a file.
std::unique_ptr<Agent> loaded_from(const std::string& bytes, const EnvSpec& spec,
                                   const std::string& id) {
  const std::string file =
      (std::filesystem::temp_directory_path() / "shardgym_polished_test.ckpt").string();
  checkpoint::write_file_atomic(file, bytes, "test");
  std::unique_ptr<Agent> back = make_ppo_agent(ParsedId::parse(id), spec, 99);
  back->load(file);
  std::remove(file.c_str());
  return back;
}

TEST_F(PPOTest, PolishKeepsWholeKindSubstitutionsThatGainAndCheckpointsThem) {
  // One update (the policy has hardly moved: its greedy plan is Megatron-LM's), then a search.
  // The tiny scenario has plans better than Megatron-LM's, so a substitution must be kept,
  // and the greedy policy must do better on a seed the search never saw.
  ExperimentSpec spec = tiny_scenario();
  VectorEnv envs = vector_env(spec, 2);
  const std::string id = "ppo(rollout=16,hidden=16,polish=1)";
  std::unique_ptr<Agent> agent = polished_ppo(id, envs.spec(), 3);
  PPO before(envs.spec(), PPOConfig::from_id(ParsedId::parse(id)), 3);  // the same, unpolished
  const std::vector<std::string> notes = one_update_of_two_envs(*agent, envs);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("polish after update 1"), std::string::npos);
  EXPECT_EQ(notes[0].find(" 0 substitutions kept"), std::string::npos) << notes[0];
  EXPECT_GT(greedy_return(*agent, spec), greedy_return(before, spec) + 1e-3);
  // Every block of a kind holds one entry at every step (a table maps entries, not blocks).
  const std::vector<Action> plans = greedy_plans(*agent, spec, 7);
  for (const Action& plan : plans)
    for (size_t b = 2; b < plan.size(); ++b) EXPECT_EQ(plan[b], plan[b % 2]);
  EXPECT_NE(greedy_plans(before, spec, 7), plans);
  // The table travels with the checkpoint.
  EXPECT_EQ(greedy_plans(*loaded_from(agent->save_bytes(), envs.spec(), id), spec, 7), plans);
  // A PPO checkpoint that carries the tables itself (the layout before the search was an
  // agent of its own) loads with them; a damaged table is refused and changes nothing.
  auto& polished = dynamic_cast<Polished&>(*agent);
  checkpoint::RecordFile legacy = checkpoint::RecordFile::decode(
      polished.inner().save_bytes(), "test", 4096);
  const std::vector<int32_t> sub = polished.tables().sub;
  const std::vector<float> keys = polished.tables().key_values;
  legacy.put("sub", checkpoint::Elem::kI32, {int64_t(sub.size())}, sub.data());
  legacy.put("sub_keys", checkpoint::Elem::kF32, {int64_t(keys.size())}, keys.data());
  EXPECT_EQ(greedy_plans(*loaded_from(legacy.encode(), envs.spec(), id), spec, 7), plans);
  std::vector<int32_t> bad = sub;
  bad[1] = 1 << 20;  // no entry of the catalog
  legacy.put("sub", checkpoint::Elem::kI32, {int64_t(bad.size())}, bad.data());
  EXPECT_THROW(agent->load_bytes(legacy.encode(), "damaged"), std::runtime_error);
  EXPECT_EQ(greedy_plans(*agent, spec, 7), plans);
  // A restart starts a fresh policy without tables.
  polished.start_afresh(1);
  EXPECT_EQ(polished.tables().sub, SubstitutionTables(envs.spec()).sub);
}

TEST_F(PPOTest, PolishKeysTablesByConditionsAndCheckpointsThem) {
  // A link drop halfway: two conditions, so a search whose substitutions for all steps stop
  // gaining goes on to a table per condition; the keys and tables travel with the checkpoint.
  ExperimentSpec spec = tiny_scenario();
  test_specs::add_link_drop(spec, 8, "nvlink", 0.25);
  VectorEnv envs = vector_env(spec, 2);
  const std::string id = "ppo(rollout=16,hidden=16,polish=1)";
  std::unique_ptr<Agent> agent = polished_ppo(id, envs.spec(), 3);
  const std::vector<std::string> notes = one_update_of_two_envs(*agent, envs);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("for one of 2 conditions)"), std::string::npos) << "two keys";
  EXPECT_EQ(greedy_plans(*loaded_from(agent->save_bytes(), envs.spec(), id), spec, 7),
            greedy_plans(*agent, spec, 7));
}

TEST_F(PPOTest, LearnsWithMaskedEntries) {
  // Device memory just above Megatron's needs: heavier entries are masked, so the policy's
  // distributions carry −inf logits through sampling, entropy and gradients.
  ExperimentSpec spec = tiny_scenario();
  {
    auto probe = agent_tests::sim_env(spec);
    probe->reset(0);
    const auto m = probe->run().estimate(probe->run().plan());
    ASSERT_TRUE(m && m->ok);
    spec.cluster.devices[0].memory_bytes = m->peak_memory_bytes[0] * 1.02;
  }
  VectorEnv envs = vector_env(spec, 2);
  envs.reset(0);
  const auto masks = envs.action_masks();
  ASSERT_GT(std::count(masks[0].begin(), masks[0].end(), 0), 0);
  PPO ppo(envs.spec(), PPOConfig::from_id(ParsedId::parse("ppo(rollout=16,hidden=16)")), 1);
  PPOTrainResult r = ppo.train(envs, 2 * 16 * 3);
  for (const PPOUpdate& u : r.updates) {
    EXPECT_TRUE(std::isfinite(u.policy_loss) && std::isfinite(u.value_loss) &&
                std::isfinite(u.entropy) && std::isfinite(u.approx_kl));
    EXPECT_GT(u.entropy, 0);
  }
}

// With norm_reward the returns' statistics are part of the state: a loaded agent that began
// them afresh would scale the next update's rewards otherwise and act differently after it.
TEST_F(PPOTest, AgentApiTrainsAndCheckpointsRestoreEverything) {
  for (const std::string id : {"ppo(rollout=12,minibatches=3,hidden=16)",
                               "ppo(rollout=12,minibatches=3,hidden=16,norm_reward=1)"}) {
    SCOPED_TRACE(id);
    ExperimentSpec spec = tiny_scenario();
    auto env = agent_tests::sim_env(spec);
    auto a = make_agent(id, env->spec(), 5);
    int updates = 0;
    for (int e = 0; e < 2; ++e) {
      ResetResult start = env->reset(e);
      Observation obs = start.obs;
      std::vector<int32_t> plan = start.info.plan_indices;
      a->begin_episode(*env);
      while (true) {
        Action act = a->act(obs, env->action_mask(), plan);
        StepResult s = env->step(act);
        a->observe({obs, act, s.reward, s.obs, s.terminated, s.truncated, false});
        updates += a->update();
        obs = s.obs;
        plan = s.info.plan_indices;
        if (s.terminated || s.truncated) break;
      }
    }
    EXPECT_EQ(updates, 2);  // 32 steps, an update every 12
    const std::string file =
        (std::filesystem::temp_directory_path() / "shardgym_ppo_test.ckpt").string();
    a->save(file);
    auto b = make_agent(id, env->spec(), 99);
    b->load(file);
    auto wrong = make_agent("ppo(hidden=8)", env->spec(), 0);
    EXPECT_THROW(wrong->load(file), std::runtime_error);
    auto with_plan = make_agent("ppo(rollout=12,minibatches=3,hidden=16,plan=1)", env->spec(), 0);
    EXPECT_THROW(with_plan->load(file), std::runtime_error);  // saved without plan rows
    std::remove(file.c_str());
    // Both continue identically, through the next updates (8 buffered steps + 4 more, then
    // another 12).
    auto ea = agent_tests::sim_env(spec), eb = agent_tests::sim_env(spec);
    agent_tests::Rollout ra = agent_tests::rollout(*ea, *a, 7, 2, true);
    agent_tests::Rollout rb = agent_tests::rollout(*eb, *b, 7, 2, true);
    EXPECT_EQ(ra.actions, rb.actions);
    EXPECT_EQ(ra.invalid, 0);
    // And hold the same state after: parameters, moments, rollout, generator, statistics.
    const std::string fa = file + ".a", fb = file + ".b";
    a->save(fa);
    b->save(fb);
    EXPECT_EQ(agent_tests::slurp(fa), agent_tests::slurp(fb));
    std::remove(fa.c_str());
    std::remove(fb.c_str());
  }
}

}  // namespace
}  // namespace shardgym
