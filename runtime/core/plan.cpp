#include "runtime/core/plan.h"

#include <cctype>
#include <stdexcept>

#include "runtime/core/catalog.h"

namespace shardgym {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

Strategy parse_entry(const std::string& text, const std::string& where) {
  try {
    return Strategy::parse(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
}

}  // namespace

Plan Plan::uniform(const Strategy& s, int num_blocks) {
  return Plan{std::vector<Strategy>(num_blocks, s)};
}

std::string Plan::to_string() const {
  if (blocks.empty()) return "";
  bool same = true;
  for (const auto& b : blocks) same = same && b == blocks.front();
  if (same) return "uniform:" + blocks.front().to_string();
  bool alternating = size() % 2 == 0;
  for (int i = 2; alternating && i < size(); ++i) alternating = blocks[i] == blocks[i % 2];
  if (alternating)
    return "attn=" + blocks[0].to_string() + "|mlp=" + blocks[1].to_string();
  std::string out;
  for (int i = 0; i < size();) {
    int j = i;
    while (j < size() && blocks[j] == blocks[i]) ++j;
    if (!out.empty()) out += ";";
    if (j - i > 1) out += std::to_string(j - i) + "*";
    out += blocks[i].to_string();
    i = j;
  }
  return out;
}

Plan Plan::parse(const std::string& raw, int num_blocks) {
  const std::string text = trim(raw);
  if (text.empty()) throw std::invalid_argument("empty plan");
  if (text.rfind("uniform:", 0) == 0)
    return uniform(parse_entry(text.substr(8), "plan 'uniform:'"), num_blocks);
  if (text.rfind("attn=", 0) == 0) {
    const auto parts = split(text, '|');
    if (parts.size() != 2 || parts[1].rfind("mlp=", 0) != 0)
      throw std::invalid_argument("plan '" + text + "': expected attn=STRATEGY|mlp=STRATEGY");
    if (num_blocks % 2 != 0) throw std::invalid_argument("attn=|mlp= plans need an even number of blocks");
    const Strategy a = parse_entry(parts[0].substr(5), "plan attn=");
    const Strategy m = parse_entry(parts[1].substr(4), "plan mlp=");
    Plan p;
    for (int i = 0; i < num_blocks; ++i) p.blocks.push_back(i % 2 == 0 ? a : m);
    return p;
  }
  Plan p;
  int entry = 0;
  for (const auto& item : split(text, ';')) {
    ++entry;
    if (item.empty()) throw std::invalid_argument("plan entry " + std::to_string(entry) + " is empty");
    int repeat = 1;
    std::string body = item;
    const size_t star = item.find('*');
    if (star != std::string::npos && star < item.find('(')) {
      const std::string count = trim(item.substr(0, star));
      bool digits = !count.empty() && count.size() < 7;
      for (char c : count) digits = digits && std::isdigit(static_cast<unsigned char>(c));
      if (!digits || std::stoi(count) < 1)
        throw std::invalid_argument("plan entry " + std::to_string(entry) + ": bad repeat count '" + count + "'");
      repeat = std::stoi(count);
      body = item.substr(star + 1);
    }
    const Strategy s = parse_entry(body, "plan entry " + std::to_string(entry));
    for (int r = 0; r < repeat; ++r) p.blocks.push_back(s);
  }
  if (p.size() != num_blocks)
    throw std::invalid_argument("plan has " + std::to_string(p.size()) + " blocks but the model has " +
                                std::to_string(num_blocks) + " (2 per layer: attention, MLP)");
  return p;
}

std::string Plan::validate(const ModelSpec& model, int world) const {
  if (size() != model.num_blocks())
    return "plan has " + std::to_string(size()) + " blocks but the model has " +
           std::to_string(model.num_blocks());
  for (int b = 0; b < size(); ++b) {
    const std::string why = strategy_invalid_reason(blocks[b], model, ModelSpec::block_kind(b), world);
    if (!why.empty())
      return "block " + std::to_string(b) + " (layer " + std::to_string(b / 2) + " " +
             block_kind_name(ModelSpec::block_kind(b)) + "): " + why;
  }
  return "";
}

}  // namespace shardgym
