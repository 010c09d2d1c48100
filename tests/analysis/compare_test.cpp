// Comparison table: ratios, per-agent summaries, text and markdown rendering.
#include "analysis/compare.h"

#include <sstream>

#include <gtest/gtest.h>

#include "analysis/table.h"

namespace shardgym {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(CompareTest, PairedRatios) {
  EXPECT_EQ(paired_ratios({2, 3}, {1, 2}), (std::vector<double>{2.0, 1.5}));
  EXPECT_THROW(paired_ratios({1, 2}, {1}), std::invalid_argument);
  EXPECT_THROW(paired_ratios({1}, {0}), std::invalid_argument);
}

TEST(CompareTest, SummaryPerAgent) {
  std::vector<AgentRuns> runs = {
      {"megatron", {1, 1, 1}, {1, 1, 1}, {1, 1, 1}},
      {"ppo", {1.10, 1.14, 1.09, 1.12}, {0.97, 0.96, 0.98, 0.95}, {}},
  };
  const auto rows = summarize_runs(runs);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].throughput.point, 1);
  EXPECT_EQ(rows[0].throughput.low, 1);
  EXPECT_EQ(rows[1].runs, 4);
  EXPECT_EQ(rows[1].energy.n, 0);
  EXPECT_GT(rows[1].throughput.point, 1.09);
  EXPECT_LT(rows[1].throughput.point, 1.14);
}

TEST(CompareTest, TextTableIsAligned) {
  std::vector<AgentRuns> runs = {{"megatron", {1, 1}, {1, 1}, {1, 1}},
                                 {"random", {0.81, 0.85}, {1.2, 1.3}, {1.1, 1.15}}};
  const std::string text = comparison_table(summarize_runs(runs)).render(TableFormat::kText);
  const auto l = lines(text);
  ASSERT_EQ(l.size(), 4u);  // header, rule, two rows
  EXPECT_NE(l[0].find("throughput ×Megatron"), std::string::npos);
  // Right-aligned last column: every line has the same display width.
  for (const auto& line : l) EXPECT_EQ(display_width(line), display_width(l[0])) << line;
  EXPECT_EQ(l[2].rfind("megatron", 0), 0u);
}

TEST(CompareTest, MarkdownTable) {
  std::vector<AgentRuns> runs = {{"a|b", {1.2}, {}, {}}};
  const std::string md = format_comparison(runs, TableFormat::kMarkdown);
  const auto l = lines(md);
  ASSERT_GE(l.size(), 4u);
  EXPECT_EQ(l[0].rfind("| agent | runs |", 0), 0u) << l[0];
  EXPECT_EQ(l[1], "|---|---:|---:|---:|---:|");
  EXPECT_NE(l[2].find("a\\|b"), std::string::npos) << l[2];
  EXPECT_NE(l[2].find("1.20 [1.20, 1.20]"), std::string::npos) << l[2];
  EXPECT_NE(l[2].find("n/a"), std::string::npos) << l[2];
  EXPECT_NE(md.find("IQM"), std::string::npos);
  EXPECT_NE(md.find("95%"), std::string::npos);
}

TEST(TableTest, RowWidthIsChecked) {
  Table t({"a", "b"});
  EXPECT_THROW(t.add_row({"1"}), std::invalid_argument);
  t.add_row({"1", "2"});
  EXPECT_EQ(t.rows(), 1);
  EXPECT_EQ(display_width("×"), 1);
}

}  // namespace
}  // namespace shardgym
