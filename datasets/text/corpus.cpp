#include "datasets/text/corpus.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <sys/stat.h>

#include "datasets/text/tokenizer.h"

namespace shardgym::text {
namespace {

constexpr const char* kLicenseDir = "/usr/share/common-licenses/";
constexpr const char* kLicenseFiles[] = {
    "GPL-3",    "GPL-2",      "GPL-1",   "LGPL-3",  "LGPL-2.1", "LGPL-2", "GFDL-1.3",
    "GFDL-1.2", "Apache-2.0", "MPL-2.0", "MPL-1.1", "Artistic", "BSD",    "CC0-1.0"};

uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void check_fraction(double f) {
  if (!(f > 0 && f < 1)) {
    throw std::invalid_argument("TextCorpus: validation_fraction " + std::to_string(f) +
                                " must be inside (0, 1)");
  }
}

void check_shape(int batch, int seq) {
  if (batch < 1 || seq < 1) {
    throw std::invalid_argument("TextCorpus: batch " + std::to_string(batch) + " and seq " +
                                std::to_string(seq) + " must be positive");
  }
}

}  // namespace

const char* split_name(Split split) { return split == Split::kTrain ? "train" : "validation"; }

std::vector<std::string> default_corpus_paths() {
  std::vector<std::string> out;
  for (const char* name : kLicenseFiles) {
    const std::string path = std::string(kLicenseDir) + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(path);
  }
  if (out.empty()) {
    throw std::runtime_error(std::string("default text corpus: no licence text found in ") +
                             kLicenseDir + " (set live.corpus to a text file)");
  }
  return out;
}

TextCorpus TextCorpus::from_text(const std::string& text, double validation_fraction) {
  check_fraction(validation_fraction);
  std::vector<int32_t> all = ByteTokenizer().encode(text);
  const size_t n_val = static_cast<size_t>(static_cast<double>(all.size()) * validation_fraction);
  TextCorpus c;
  c.train_.assign(all.begin(), all.end() - static_cast<std::ptrdiff_t>(n_val));
  c.validation_.assign(all.end() - static_cast<std::ptrdiff_t>(n_val), all.end());
  return c;
}

TextCorpus TextCorpus::load(const std::vector<std::string>& paths, double validation_fraction) {
  if (paths.empty()) throw std::invalid_argument("TextCorpus::load: no files given");
  std::string text;
  for (const auto& path : paths) {
    // A corpus is a regular text file of bounded size: a device or pipe (`/dev/zero`) would
    // be read until memory runs out.
    constexpr std::uintmax_t kMaxBytes = std::uintmax_t(1) << 30;
    std::error_code ec;
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
      throw std::runtime_error("TextCorpus::load: '" + path + "' is not a regular file");
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxBytes)
      throw std::runtime_error("TextCorpus::load: '" + path + "' is " + std::to_string(size) +
                               " bytes, above the limit of " + std::to_string(kMaxBytes));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("TextCorpus::load: cannot read '" + path + "'");
    std::ostringstream s;
    s << in.rdbuf();
    if (!text.empty()) text += "\n\n";
    text += s.str();
  }
  TextCorpus c = from_text(text, validation_fraction);
  c.sources_ = paths;
  return c;
}

TextCorpus TextCorpus::load_default(double validation_fraction) {
  return load(default_corpus_paths(), validation_fraction);
}

const std::vector<int32_t>& TextCorpus::tokens(Split split) const {
  return split == Split::kTrain ? train_ : validation_;
}

TokenBatch TextCorpus::window_batch(Split split, const std::vector<size_t>& offsets,
                                    int seq) const {
  check_shape(static_cast<int>(offsets.size()), seq);
  const auto& toks = tokens(split);
  const size_t window = static_cast<size_t>(seq) + 1;
  if (toks.size() < window) {
    throw std::invalid_argument(std::string("TextCorpus: the ") + split_name(split) +
                                " split has " + std::to_string(toks.size()) +
                                " tokens, fewer than seq+1 = " + std::to_string(window));
  }
  TokenBatch b;
  b.batch = static_cast<int>(offsets.size());
  b.seq = seq;
  b.tokens.reserve(offsets.size() * seq);
  b.targets.reserve(offsets.size() * seq);
  for (size_t o : offsets) {
    if (o + window > toks.size()) {
      throw std::invalid_argument("TextCorpus: window at " + std::to_string(o) +
                                  " runs past the end of the " + split_name(split) + " split");
    }
    b.tokens.insert(b.tokens.end(), toks.begin() + o, toks.begin() + o + seq);
    b.targets.insert(b.targets.end(), toks.begin() + o + 1, toks.begin() + o + window);
  }
  return b;
}

BatchSampler::BatchSampler(const TextCorpus& corpus, Split split, int batch, int seq, uint64_t seed)
    : corpus_(&corpus), split_(split), batch_(batch), seq_(seq), state_(seed) {
  check_shape(batch, seq);
  if (corpus.num_tokens(split) < static_cast<size_t>(seq) + 1) {
    throw std::invalid_argument(std::string("BatchSampler: the ") + split_name(split) +
                                " split has " + std::to_string(corpus.num_tokens(split)) +
                                " tokens, fewer than seq+1 = " + std::to_string(seq + 1));
  }
}

TokenBatch BatchSampler::next() {
  const uint64_t starts = corpus_->num_tokens(split_) - static_cast<uint64_t>(seq_);
  std::vector<size_t> offsets(batch_);
  for (auto& o : offsets) o = static_cast<size_t>(splitmix64(&state_) % starts);
  return corpus_->window_batch(split_, offsets, seq_);
}

TokenBatch sequential_batch(const TextCorpus& corpus, Split split, int batch, int seq, int index) {
  check_shape(batch, seq);
  if (index < 0) throw std::invalid_argument("sequential_batch: negative index");
  const size_t n = corpus.num_tokens(split);
  const size_t window = static_cast<size_t>(seq) + 1;
  const size_t count = n / window;  // non-overlapping windows in the split
  if (count == 0) {
    throw std::invalid_argument(std::string("sequential_batch: the ") + split_name(split) +
                                " split has " + std::to_string(n) +
                                " tokens, fewer than seq+1 = " + std::to_string(window));
  }
  std::vector<size_t> offsets(batch);
  for (int i = 0; i < batch; ++i) {
    offsets[i] = ((static_cast<size_t>(index) * batch + i) % count) * window;
  }
  return corpus.window_batch(split, offsets, seq);
}

}  // namespace shardgym::text
