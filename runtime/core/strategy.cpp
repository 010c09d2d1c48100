#include "runtime/core/strategy.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "runtime/core/strategy_family.h"
#include "runtime/core/text.h"

namespace shardgym {

namespace {

// The interned head lists: append-only, read without a lock (each slot is written once, before
// its id is published by the release store of `count`).
struct HeadLists {
  std::mutex mu;
  std::map<std::vector<int>, uint32_t> ids;
  std::atomic<const std::vector<int>*> lists[kMaxUnevenSplits] = {};
};

HeadLists& head_lists() {
  static HeadLists* t = new HeadLists();  // never destroyed: strategies outlive static order
  return *t;
}

const std::vector<int> kEven;

}  // namespace

const std::vector<int>& Strategy::heads() const {
  if (heads_id == 0 || heads_id >= kMaxUnevenSplits) return kEven;
  const std::vector<int>* l = head_lists().lists[heads_id].load(std::memory_order_acquire);
  return l ? *l : kEven;
}

void Strategy::set_heads(const std::vector<int>& counts) {
  if (counts.empty() ||
      std::all_of(counts.begin(), counts.end(), [&](int h) { return h == counts[0]; })) {
    heads_id = 0;
    return;
  }
  HeadLists& t = head_lists();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.ids.find(counts);
  if (it != t.ids.end()) {
    heads_id = it->second;
    return;
  }
  const uint32_t id = static_cast<uint32_t>(t.ids.size()) + 1;
  if (id >= kMaxUnevenSplits)
    throw std::length_error("more than " + std::to_string(kMaxUnevenSplits - 1) +
                            " distinct uneven head splits in one process");
  t.lists[id].store(new std::vector<int>(counts), std::memory_order_release);
  t.ids.emplace(counts, id);
  heads_id = id;
}

double Strategy::part(int i) const {
  const std::vector<int>& h = heads();
  if (h.empty() || i < 0 || i >= static_cast<int>(h.size())) return 1.0;
  long long sum = 0;
  for (int x : h) sum += x;
  return sum > 0 ? double(t) * h[i] / double(sum) : 1.0;
}

double Strategy::max_part() const {
  const std::vector<int>& h = heads();
  if (h.empty()) return 1.0;
  return part(static_cast<int>(std::max_element(h.begin(), h.end()) - h.begin()));
}

int Strategy::degree() const { return family_of(kind).degree(*this); }

Strategy Strategy::tp1d(int t, bool sp) {
  Strategy s;
  s.kind = StrategyKind::kTP1D;
  s.t = t;
  s.sp = sp;
  return s;
}

Strategy Strategy::tp2d(int d1, int d2, bool row_first) {
  Strategy s;
  s.kind = StrategyKind::kTP2D;
  s.d1 = d1;
  s.d2 = d2;
  s.row_first = row_first;
  return s;
}

bool Strategy::operator==(const Strategy& o) const {
  return kind == o.kind && chunks == o.chunks && recompute == o.recompute &&
         selective == o.selective && family_of(kind).same(*this, o);
}

std::string Strategy::to_string() const {
  const StrategyFamily& f = family_of(kind);
  std::vector<std::string> opts;
  f.print(*this, opts);
  if (chunks != 1) opts.push_back("chunks=" + std::to_string(chunks));
  if (recompute) opts.push_back("recompute=1");
  if (selective) opts.push_back("recompute=sel");
  std::string out = f.name();
  for (size_t i = 0; i < opts.size(); ++i) out += (i ? "," : "(") + opts[i];
  return opts.empty() ? out : out + ")";
}

Strategy Strategy::parse(const std::string& raw) {
  StrategyText text{trim(raw), {}};
  const std::string& t = text.text;
  const size_t open = t.find('(');
  const std::string name = trim(t.substr(0, open));
  std::map<std::string, std::string> kv;
  if (open != std::string::npos) {
    if (t.back() != ')') text.fail("missing ')'");
    const std::string body = t.substr(open + 1, t.size() - open - 2);
    std::stringstream ss(body);
    std::string item;
    while (std::getline(ss, item, ',')) {
      item = trim(item);
      if (item.empty()) text.fail("empty option");
      const size_t eq = item.find('=');
      if (eq == std::string::npos) text.fail("option '" + item + "' is not key=value");
      const std::string key = trim(item.substr(0, eq));
      if (!kv.emplace(key, trim(item.substr(eq + 1))).second) text.fail("option '" + key + "' given twice");
    }
  }
  const StrategyFamily* f = family_named(name);
  if (!f) text.fail("unknown kind '" + name + "'");
  Strategy s;
  s.kind = f->kind();
  std::vector<std::string> given;
  for (const auto& entry : kv) given.push_back(entry.first);
  f->require(given, text);
  for (const auto& [key, value] : kv) {
    if (f->parse_option(s, key, value, text)) continue;
    if (key == "chunks") {
      s.chunks = text.parse_int(key, value);
    } else if (key == "recompute") {
      if (value == "sel" || value == "selective") s.selective = true;
      else if (value == "full") s.recompute = true;
      else s.recompute = text.parse_flag(key, value);
    } else {
      text.fail("option '" + key + "' does not apply to " + name);
    }
  }
  f->finish(s, text);
  if (s.chunks < 1) text.fail("chunks must be ≥ 1");
  return s;
}

}  // namespace shardgym
