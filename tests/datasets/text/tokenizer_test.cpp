#include "datasets/text/tokenizer.h"

#include <gtest/gtest.h>

namespace shardgym::text {
namespace {

TEST(ByteTokenizer, EveryByteRoundTrips) {
  ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const auto ids = tok.encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok.decode(ids), all);
  EXPECT_EQ(tok.vocab_size(), 256);
}

TEST(ByteTokenizer, Utf8IsBytesNotCodePoints) {
  ByteTokenizer tok;
  const std::string s = "\xc3\xa9t\xc3\xa9";  // "été": 5 bytes
  const auto ids = tok.encode(s);
  EXPECT_EQ(ids, (std::vector<int32_t>{0xc3, 0xa9, 't', 0xc3, 0xa9}));
  EXPECT_EQ(tok.decode(ids), s);
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(ByteTokenizer, DecodeRejectsOutOfRangeTokens) {
  ByteTokenizer tok;
  EXPECT_THROW(tok.decode({65, 256}), std::invalid_argument);
  EXPECT_THROW(tok.decode({-1}), std::invalid_argument);
}

}  // namespace
}  // namespace shardgym::text
