#include <algorithm>

#include <gtest/gtest.h>

#include "agents/agent.h"

namespace shardgym {
namespace {

TEST(ParsedId, NameOnly) {
  ParsedId id = ParsedId::parse("  greedy ");
  EXPECT_EQ(id.name, "greedy");
  EXPECT_TRUE(id.params.empty());
  EXPECT_EQ(ParsedId::parse("random()").params.size(), 0u);
}

TEST(ParsedId, NestedParenthesesAndCommasStayInTheValue) {
  ParsedId id = ParsedId::parse("static(plan=tp2d(d1=2,d2=4,first=row), seed = 3)");
  EXPECT_EQ(id.name, "static");
  ASSERT_EQ(id.params.size(), 2u);
  EXPECT_EQ(id.params.at("plan"), "tp2d(d1=2,d2=4,first=row)");
  EXPECT_EQ(id.get("seed", 0.0), 3.0);
  EXPECT_EQ(id.get("missing", 1.5), 1.5);
  EXPECT_EQ(id.get("missing", std::string("x")), "x");
}

TEST(ParsedId, PlanTextsWithSeparatorsAndEquals) {
  ParsedId id = ParsedId::parse("static(plan=attn=tp1d(t=4)|mlp=tp2d(d1=2,d2=2,first=col))");
  EXPECT_EQ(id.params.at("plan"), "attn=tp1d(t=4)|mlp=tp2d(d1=2,d2=2,first=col)");
  ParsedId rep = ParsedId::parse("static(plan=2*tp1d(t=4);2*dp)");
  EXPECT_EQ(rep.params.at("plan"), "2*tp1d(t=4);2*dp");
}

TEST(ParsedId, ToStringRoundTrips) {
  ParsedId id = ParsedId::parse("ppo(lr=3e-4,clip=0.2)");
  EXPECT_EQ(id.to_string(), "ppo(clip=0.2,lr=3e-4)");
  EXPECT_EQ(ParsedId::parse(id.to_string()).params, id.params);
}

TEST(ParsedId, RejectsMalformedIds) {
  for (const char* bad : {"", "(a=1)", "x(a=1", "x(a=1))", "x(a)", "x(=1)", "x(a=1,a=2)", "x(a=(1)",
                          "x)y", "x(a=1)z"}) {
    EXPECT_THROW(ParsedId::parse(bad), std::invalid_argument) << bad;
  }
}

TEST(ParsedId, NumbersAreChecked) {
  ParsedId id = ParsedId::parse("x(a=abc,b=1e-3,c=2x)");
  EXPECT_THROW(id.get("a", 0.0), std::invalid_argument);
  EXPECT_DOUBLE_EQ(id.get("b", 0.0), 1e-3);
  EXPECT_THROW(id.get("c", 0.0), std::invalid_argument);
}

TEST(ParsedId, CheckKeysNamesTheUnknownOne) {
  ParsedId id = ParsedId::parse("greedy(scope=kind,typo=1)");
  try {
    id.check_keys({"scope", "tol"});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("typo"), std::string::npos) << e.what();
  }
}

TEST(AgentRegistry, ListsTheBuiltInAgents) {
  // `ppo` is listed in every build: without LibTorch its parameters are still checked and
  // creating one says what is missing.
  const std::vector<std::string> expected = {
      "anneal",      "atp",    "dp",           "dynamic-oracle", "greedy",        "hindsight-static",
      "megatron",    "megatron-sp", "oracle",  "phase-oracle",   "ppo",           "random",
      "random-search", "replan", "static"};
  EXPECT_EQ(registered_agent_names(), expected);
  for (const auto& name : expected) EXPECT_FALSE(agent_description(name).empty()) << name;
  EXPECT_NO_THROW(check_agent_id("ppo(ent=0.01)"));
  EXPECT_THROW(check_agent_id("ppo(ent=abc)"), std::invalid_argument);
#ifndef SHARDGYM_TEST_WITH_PPO
  try {
    make_agent("ppo", EnvSpec{}, 0);
    ADD_FAILURE() << "ppo created in a build without LibTorch";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs LibTorch"), std::string::npos) << e.what();
  }
#endif
}

TEST(AgentRegistry, UnknownAgentErrorListsKnownNames) {
  EnvSpec spec;
  spec.num_blocks = 4;
  spec.catalog_size = 3;
  try {
    make_agent("nope(x=1)", spec, 0);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    for (const char* name : {"nope", "greedy", "megatron"})
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  EXPECT_THROW(make_agent("random(bogus=1)", spec, 0), std::invalid_argument);
  EXPECT_THROW(make_agent("greedy(scope=galaxy)", spec, 0), std::invalid_argument);
  EXPECT_THROW(agent_description("nope"), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
