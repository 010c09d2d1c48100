// TextCorpus: the training text of the live GPT, and seeded batches drawn from it.
//
// The default corpus is the licence texts every Debian system ships in
// /usr/share/common-licenses (base-files): ~270 KB of real English prose, no download. Any
// other text file works too (LiveSpec::corpus). The token stream is split once: the first
// (1 - validation_fraction) for training, the rest for validation, so the two never overlap.
// Batches are windows of seq+1 tokens: tokens = window[0..seq), targets = window[1..seq];
// offsets come from a SplitMix64 stream, so a seed gives the same batches on every platform.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardgym::text {

enum class Split { kTrain, kValidation };
const char* split_name(Split split);

// Row-major [batch, seq] token ids and next-token targets.
struct TokenBatch {
  int batch = 0;
  int seq = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
};

// The common-licenses files present on this system, in a fixed order (symlinks skipped so
// no text appears twice). Throws std::runtime_error if none is readable.
std::vector<std::string> default_corpus_paths();

class TextCorpus {
 public:
  // Concatenates `paths` (in order, a blank line between files) and tokenizes bytewise.
  // Throws std::runtime_error naming a file that cannot be read, std::invalid_argument for
  // an empty list or a validation_fraction outside (0, 1).
  static TextCorpus load(const std::vector<std::string>& paths, double validation_fraction = 0.1);
  static TextCorpus load_default(double validation_fraction = 0.1);
  static TextCorpus from_text(const std::string& text, double validation_fraction = 0.1);

  const std::vector<int32_t>& tokens(Split split) const;
  size_t num_tokens(Split split) const { return tokens(split).size(); }
  const std::vector<std::string>& sources() const { return sources_; }

  // Throws std::invalid_argument if the split is shorter than seq+1 tokens.
  TokenBatch window_batch(Split split, const std::vector<size_t>& offsets, int seq) const;

 private:
  std::vector<int32_t> train_;
  std::vector<int32_t> validation_;
  std::vector<std::string> sources_;
};

// Random windows, reproducible from `seed`.
class BatchSampler {
 public:
  BatchSampler(const TextCorpus& corpus, Split split, int batch, int seq, uint64_t seed);
  TokenBatch next();

 private:
  const TextCorpus* corpus_;
  Split split_;
  int batch_;
  int seq_;
  uint64_t state_;
};

// The i-th of the evenly spaced, non-overlapping windows of a split (wrapping around), for
// evaluation: the same batch for the same i, whatever was sampled before.
TokenBatch sequential_batch(const TextCorpus& corpus, Split split, int batch, int seq, int index);

}  // namespace shardgym::text
