// ByteTokenizer: the live GPT's vocabulary is the 256 byte values, nothing else.
//
// Byte-level keeps the data path free of trained vocabularies and downloads: any text file
// is a valid corpus, encode/decode are exact inverses for every byte string, and the model's
// vocab only has to be >= 256.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardgym::text {

class ByteTokenizer {
 public:
  static constexpr int kVocabSize = 256;

  int vocab_size() const { return kVocabSize; }
  // One token per byte, value 0..255.
  std::vector<int32_t> encode(const std::string& text) const;
  // Inverse of encode; throws std::invalid_argument on a token outside 0..255.
  std::string decode(const std::vector<int32_t>& tokens) const;
};

}  // namespace shardgym::text
