#include "datasets/text/corpus.h"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "datasets/text/tokenizer.h"

namespace shardgym::text {
namespace {

TEST(DefaultCorpus, IsTheDebianLicenceTexts) {
  const auto paths = default_corpus_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), "/usr/share/common-licenses/GPL-3");  // base-files always ships it
  const TextCorpus c = TextCorpus::load_default();
  EXPECT_EQ(c.sources(), paths);
  const size_t n = c.num_tokens(Split::kTrain) + c.num_tokens(Split::kValidation);
  EXPECT_GT(n, 30000u);  // GPL-3 alone is ~35 KB
  // 10% validation, rounded down.
  EXPECT_EQ(c.num_tokens(Split::kValidation), static_cast<size_t>(n * 0.1));
  // The GPL-3 opens the stream.
  const std::string head = ByteTokenizer().decode(
      {c.tokens(Split::kTrain).begin(), c.tokens(Split::kTrain).begin() + 80});
  EXPECT_NE(head.find("GNU GENERAL PUBLIC LICENSE"), std::string::npos) << head;
}

TEST(Corpus, LoadConcatenatesFilesWithABlankLineAndSplitsAtTheEnd) {
  const std::string a = ::testing::TempDir() + "corpus_a.txt";
  const std::string b = ::testing::TempDir() + "corpus_b.txt";
  std::ofstream(a) << "0123456789";
  std::ofstream(b) << "abcdefgh";
  const TextCorpus c = TextCorpus::load({a, b}, 0.25);
  // 10 + 2 + 8 = 20 bytes; the last 5 are validation.
  ByteTokenizer tok;
  EXPECT_EQ(tok.decode(c.tokens(Split::kTrain)), "0123456789\n\nabc");
  EXPECT_EQ(tok.decode(c.tokens(Split::kValidation)), "defgh");
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST(Corpus, BadInputsAreRejectedWithTheirName) {
  try {
    TextCorpus::load({"/nonexistent/corpus.txt"});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/corpus.txt"), std::string::npos);
  }
  EXPECT_THROW(TextCorpus::load({}), std::invalid_argument);
  EXPECT_THROW(TextCorpus::from_text("abc", 0.0), std::invalid_argument);
  EXPECT_THROW(TextCorpus::from_text("abc", 1.0), std::invalid_argument);
  const TextCorpus tiny = TextCorpus::from_text("abcdefghij", 0.5);
  EXPECT_THROW(BatchSampler(tiny, Split::kTrain, 2, 5, 0), std::invalid_argument);  // needs 6
  EXPECT_NO_THROW(BatchSampler(tiny, Split::kTrain, 2, 4, 0));
}

TEST(BatchSampler, TargetsAreTokensShiftedByOne) {
  const TextCorpus c = TextCorpus::load_default();
  BatchSampler s(c, Split::kTrain, 4, 32, 7);
  const TokenBatch b = s.next();
  ASSERT_EQ(b.batch, 4);
  ASSERT_EQ(b.seq, 32);
  ASSERT_EQ(b.tokens.size(), 4u * 32);
  ASSERT_EQ(b.targets.size(), 4u * 32);
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i + 1 < 32; ++i) EXPECT_EQ(b.targets[r * 32 + i], b.tokens[r * 32 + i + 1]);
  }
  for (int32_t t : b.tokens) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 256);
  }
}

TEST(BatchSampler, SameSeedSameBatchesDifferentSeedDifferent) {
  const TextCorpus c = TextCorpus::load_default();
  BatchSampler s1(c, Split::kTrain, 2, 16, 42), s2(c, Split::kTrain, 2, 16, 42);
  BatchSampler s3(c, Split::kTrain, 2, 16, 43);
  for (int i = 0; i < 5; ++i) {
    const TokenBatch a = s1.next(), b = s2.next(), d = s3.next();
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_NE(a.tokens, d.tokens);
  }
  // Consecutive batches of one stream differ.
  BatchSampler s4(c, Split::kTrain, 2, 16, 42);
  EXPECT_NE(s4.next().tokens, s4.next().tokens);
}

TEST(BatchSampler, ValidationWindowsStayInsideTheValidationSplit) {
  const TextCorpus c = TextCorpus::from_text(std::string(90, 'a') + std::string(10, 'b'), 0.1);
  BatchSampler s(c, Split::kValidation, 8, 4, 3);
  for (int i = 0; i < 10; ++i) {
    for (int32_t t : s.next().tokens) EXPECT_EQ(t, 'b');
  }
}

TEST(SequentialBatch, IsAPureFunctionOfTheIndex) {
  const TextCorpus c = TextCorpus::from_text("0123456789abcdefghij", 0.5);
  // Validation "abcdefghij", windows of 3: offsets 0,3,6 -> "ab","de","gh"; wraps after 3.
  ByteTokenizer tok;
  const TokenBatch b0 = sequential_batch(c, Split::kValidation, 2, 2, 0);
  EXPECT_EQ(tok.decode(b0.tokens), "abde");
  EXPECT_EQ(tok.decode(b0.targets), "bcef");
  const TokenBatch b1 = sequential_batch(c, Split::kValidation, 2, 2, 1);
  EXPECT_EQ(tok.decode(b1.tokens), "ghab");
  EXPECT_EQ(sequential_batch(c, Split::kValidation, 2, 2, 0).tokens, b0.tokens);
}

}  // namespace
}  // namespace shardgym::text
