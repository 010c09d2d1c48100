// The reader of published tables (experiments/published_table.h): the measured rows as given,
// and every malformed row refused with the file, its line and the column.
#include "experiments/published_table.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace shardgym {
namespace {

namespace fs = std::filesystem;

class PublishedTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shardgym_table_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& text) {
    const std::string path = (dir_ / "t.csv").string();
    std::ofstream(path) << text;
    return path;
  }
  // The message of the refusal of `rows` (under the header), or "" when accepted.
  std::string refusal(const std::string& rows) {
    try {
      read_published_table(write(kHeader + rows));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  }
  const std::string kHeader =
      "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,"
      "tensor parallelism,data parallelism,pipeline parallelism,iteration time (ms)\n";
  fs::path dir_;
};

TEST_F(PublishedTableTest, ReadsTheRowsAsGiven) {
  const auto rows = read_published_table(
      write(kHeader + "2,16,8,1024,16,24,1024,1,1,2,372.160408\r\n8,32,4,1024,16,24,1024,2,2,2,219.7\n"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[0].gpus, 2);
  EXPECT_EQ(rows[0].global_batch, 16);
  EXPECT_EQ(rows[0].micro_batch, 8);
  EXPECT_EQ(rows[0].pp, 2);
  EXPECT_DOUBLE_EQ(rows[0].iteration_ms, 372.160408);
  EXPECT_EQ(rows[1].tp, 2);
  EXPECT_EQ(rows[1].dp, 2);
}

TEST_F(PublishedTableTest, RefusesMalformedRowsNamingLineAndColumn) {
  EXPECT_NE(refusal("2,16,8,1024,16,24,1024,1,1,2\n").find("t.csv:2: 10 columns, expected 11"),
            std::string::npos);
  EXPECT_NE(refusal("2,16,8,1e3,16,24,1024,1,1,2,3\n").find("column hidden size: '1e3' is not a plain"),
            std::string::npos);
  EXPECT_NE(refusal("2,16,8,-5,16,24,1024,1,1,2,3\n").find("column hidden size"), std::string::npos);
  EXPECT_NE(refusal("2,16,8.5,1024,16,24,1024,1,1,2,3\n").find("micro batch: 8.5 is not a whole"),
            std::string::npos);
  EXPECT_NE(refusal("2,16,8,1024,16,24,1024,0,1,2,3\n").find("tensor parallelism"),
            std::string::npos);
  EXPECT_NE(refusal("4,16,8,1024,16,24,1024,1,1,2,3\n").find("is not the 4 GPUs"),
            std::string::npos);
  EXPECT_NE(refusal("2,12,8,1024,16,24,1024,1,1,2,3\n").find("does not divide the global batch 12"),
            std::string::npos);
  EXPECT_NE(refusal("2,16,8,1024,16,24,1024,1,1,2,nan\n").find("iteration time"), std::string::npos);
  EXPECT_NE(refusal(std::string(5000, '1') + "\n").find("longer than 4096"), std::string::npos);
  EXPECT_NE(refusal("").find("no rows"), std::string::npos);
  EXPECT_THROW(read_published_table((dir_ / "missing.csv").string()), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym
