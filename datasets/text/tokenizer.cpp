#include "datasets/text/tokenizer.h"

#include <stdexcept>

namespace shardgym::text {

std::vector<int32_t> ByteTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string out(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= kVocabSize) {
      throw std::invalid_argument("ByteTokenizer::decode: token " + std::to_string(tokens[i]) +
                                  " at position " + std::to_string(i) + " is outside 0..255");
    }
    out[i] = static_cast<char>(tokens[i]);
  }
  return out;
}

}  // namespace shardgym::text
