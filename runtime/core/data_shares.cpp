#include "runtime/core/data_shares.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "runtime/core/cost.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/plan.h"

namespace shardgym {
namespace {

// At most this many share groups and this weight: more groups than ranks cannot be valid, and
// the limits keep a crafted plan text from allocating (or summing past int) before validate.
constexpr size_t kMaxShareGroups = 1 << 20;
constexpr int kMaxShareWeight = 1 << 20;

}  // namespace

std::string shares_invalid_reason(const Plan& plan, const ModelSpec& model, int world) {
  const std::vector<int>& w = plan.pipeline.shares;
  if (w.empty()) return "";
  const int n = static_cast<int>(w.size());
  const int stage_world = world / std::max(1, plan.pipeline.stages);
  if (stage_world % n != 0)
    return "data shares: " + std::to_string(n) + " groups do not split a stage's " +
           std::to_string(stage_world) + " ranks";
  if (std::all_of(w.begin(), w.end(), [](int x) { return x == 0; }))
    return "data shares: every group has weight 0 (no rank would train)";
  const int g = stage_world / n;
  for (int b = 0; b < plan.size(); ++b) {
    const int t = plan.blocks[b].degree();
    if (g % t != 0)
      return "data shares: block " + std::to_string(b) + " has degree " + std::to_string(t) +
             ", which does not divide a share group of " + std::to_string(g) + " ranks";
  }
  const std::vector<int> seqs = apportion(effective_global_batch(model, world), w);
  for (int i = 0; i < n; ++i) {
    if (w[i] > 0 && seqs[i] == 0)
      return "data shares: group " + std::to_string(i) + " has weight " + std::to_string(w[i]) +
             " but no sequence of the global batch";
  }
  return "";
}

std::vector<int> apportion(int total, const std::vector<int>& weights) {
  std::vector<int> out(weights.size(), 0);
  long long sum = 0;
  for (int w : weights) sum += std::max(0, w);
  if (sum <= 0 || total <= 0) return out;
  std::vector<std::pair<long long, size_t>> rest;  // remainder numerators, index
  long long given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const long long num = static_cast<long long>(total) * std::max(0, weights[i]);
    out[i] = static_cast<int>(num / sum);
    given += out[i];
    rest.emplace_back(num % sum, i);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total && k < rest.size(); ++k, ++given) ++out[rest[k].second];
  return out;
}

std::vector<double> share_work(const std::vector<int>& weights, int global_batch, int world,
                               int stages) {
  std::vector<double> work(std::max(0, world), 1.0);
  if (weights.empty() || world <= 0) return work;
  const int n = static_cast<int>(weights.size());
  const int stage_world = world / std::max(1, stages);
  const int g = std::max(1, stage_world / n);
  const std::vector<int> seqs = apportion(global_batch, weights);
  const double even = double(std::max(1, global_batch)) / n;
  for (int r = 0; r < world; ++r) {
    const int group = std::min(n - 1, (r % std::max(1, stage_world)) / g);
    work[r] = seqs[group] / even;
  }
  return work;
}

std::vector<int> balanced_shares(int total, const std::vector<double>& speed) {
  std::vector<int> out(speed.size(), 0);
  if (std::none_of(speed.begin(), speed.end(), [](double s) { return s > 0; })) return out;
  for (int u = 0; u < total; ++u) {
    size_t best = speed.size();
    double best_t = 0;
    for (size_t i = 0; i < speed.size(); ++i) {
      if (!(speed[i] > 0)) continue;
      const double t = (out[i] + 1) / speed[i];
      if (best == speed.size() || t < best_t) best = i, best_t = t;
    }
    ++out[best];
  }
  return out;
}

std::string shares_to_string(const std::vector<int>& weights) {
  std::string out = "w=";
  for (size_t i = 0; i < weights.size(); ++i)
    out += (i ? "/" : "") + std::to_string(weights[i]);
  return out;
}

std::vector<int> parse_shares(const std::string& text) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("data shares 'dp(" + text + ")': " + why);
  };
  if (text.rfind("w=", 0) != 0) fail("expected dp(w=W0/W1/...), one weight per share group");
  std::vector<int> out;
  std::string cur;
  for (size_t i = 2; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '/') {
      if (cur.empty()) fail("an empty weight");
      if (cur.size() > 7) fail("weight '" + cur + "' is larger than " + std::to_string(kMaxShareWeight));
      const int v = std::stoi(cur);
      if (v > kMaxShareWeight) fail("weight '" + cur + "' is larger than " + std::to_string(kMaxShareWeight));
      out.push_back(v);
      if (out.size() > kMaxShareGroups) fail("more than " + std::to_string(kMaxShareGroups) + " groups");
      cur.clear();
    } else if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      cur += text[i];
    } else {
      fail(std::string("'") + text[i] + "' in a weight (weights are integers >= 0)");
    }
  }
  return out;
}

}  // namespace shardgym
