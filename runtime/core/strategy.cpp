#include "runtime/core/strategy.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "runtime/core/text.h"

namespace shardgym {
namespace {

[[noreturn]] void fail(const std::string& text, const std::string& why) {
  throw std::invalid_argument("bad strategy '" + text + "': " + why +
                              " (expected e.g. dp, tp1d(t=4), tp1d(t=4,sp=1), "
                              "tp2d(d1=2,d2=4,first=row), with optional chunks=k, recompute=1|sel; tp1d also heads=n/n/...)");
}

constexpr long long kMaxDegree = 999999;  // the largest 6-digit value parse_int accepts

int parse_int(const std::string& text, const std::string& key, const std::string& value) {
  if (value.empty()) fail(text, key + " has no value");
  for (char c : value)
    if (!std::isdigit(static_cast<unsigned char>(c))) fail(text, key + "=" + value + " is not a positive integer");
  if (value.size() > 6) fail(text, key + "=" + value + " is too large");
  return std::stoi(value);
}

bool parse_flag(const std::string& text, const std::string& key, const std::string& value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  fail(text, key + "=" + value + " must be 0 or 1");
}

}  // namespace

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

int Strategy::degree() const {
  switch (kind) {
    case StrategyKind::kDP: return 1;
    case StrategyKind::kTP1D: return t;
    case StrategyKind::kTP2D: return d1 * d2;
  }
  return 1;
}

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
  if (kind != o.kind || chunks != o.chunks || recompute != o.recompute ||
      selective != o.selective)
    return false;
  switch (kind) {
    case StrategyKind::kDP: return true;
    case StrategyKind::kTP1D: return t == o.t && sp == o.sp && heads_id == o.heads_id;
    case StrategyKind::kTP2D: return d1 == o.d1 && d2 == o.d2 && row_first == o.row_first;
  }
  return false;
}

std::string Strategy::to_string() const {
  std::ostringstream out;
  std::string opts;
  auto add = [&](const std::string& kv) { opts += (opts.empty() ? "" : ",") + kv; };
  switch (kind) {
    case StrategyKind::kDP: out << "dp"; break;
    case StrategyKind::kTP1D:
      out << "tp1d";
      add("t=" + std::to_string(t));
      if (sp) add("sp=1");
      if (uneven()) {
        const std::vector<int>& hs = heads();
        std::string h;
        for (size_t i = 0; i < hs.size(); ++i) h += (i ? "/" : "") + std::to_string(hs[i]);
        add("heads=" + h);
      }
      break;
    case StrategyKind::kTP2D:
      out << "tp2d";
      add("d1=" + std::to_string(d1));
      add("d2=" + std::to_string(d2));
      add(std::string("first=") + (row_first ? "row" : "col"));
      break;
  }
  if (chunks != 1) add("chunks=" + std::to_string(chunks));
  if (recompute) add("recompute=1");
  if (selective) add("recompute=sel");
  if (!opts.empty()) out << "(" << opts << ")";
  return out.str();
}

Strategy Strategy::parse(const std::string& raw) {
  const std::string text = trim(raw);
  const size_t open = text.find('(');
  const std::string name = trim(text.substr(0, open));
  std::map<std::string, std::string> kv;
  if (open != std::string::npos) {
    if (text.back() != ')') fail(text, "missing ')'");
    const std::string body = text.substr(open + 1, text.size() - open - 2);
    std::stringstream ss(body);
    std::string item;
    while (std::getline(ss, item, ',')) {
      item = trim(item);
      if (item.empty()) fail(text, "empty option");
      const size_t eq = item.find('=');
      if (eq == std::string::npos) fail(text, "option '" + item + "' is not key=value");
      const std::string key = trim(item.substr(0, eq));
      if (!kv.emplace(key, trim(item.substr(eq + 1))).second) fail(text, "option '" + key + "' given twice");
    }
  }
  Strategy s;
  std::vector<int> heads;
  if (name == "dp") {
    s.kind = StrategyKind::kDP;
  } else if (name == "tp1d") {
    s.kind = StrategyKind::kTP1D;
    if (!kv.count("t")) fail(text, "tp1d needs t=<degree>");
  } else if (name == "tp2d") {
    s.kind = StrategyKind::kTP2D;
    if (!kv.count("d1") || !kv.count("d2")) fail(text, "tp2d needs d1= and d2=");
  } else {
    fail(text, "unknown kind '" + name + "'");
  }
  for (const auto& [key, value] : kv) {
    if (key == "t" && s.kind == StrategyKind::kTP1D) {
      s.t = parse_int(text, key, value);
    } else if (key == "sp" && s.kind == StrategyKind::kTP1D) {
      s.sp = parse_flag(text, key, value);
    } else if (key == "heads" && s.kind == StrategyKind::kTP1D) {
      std::stringstream hs(value);
      std::string part;
      while (std::getline(hs, part, '/')) {
        if (heads.size() >= 4096) fail(text, "heads= lists more than 4096 ranks");
        heads.push_back(parse_int(text, key, trim(part)));
      }
      if (heads.empty() || value.back() == '/') fail(text, "heads= needs n/n/... (one per rank)");
    } else if (key == "d1" && s.kind == StrategyKind::kTP2D) {
      s.d1 = parse_int(text, key, value);
    } else if (key == "d2" && s.kind == StrategyKind::kTP2D) {
      s.d2 = parse_int(text, key, value);
    } else if (key == "first" && s.kind == StrategyKind::kTP2D) {
      if (value != "row" && value != "col") fail(text, "first must be row or col");
      s.row_first = value == "row";
    } else if (key == "chunks") {
      s.chunks = parse_int(text, key, value);
    } else if (key == "recompute") {
      if (value == "sel" || value == "selective") s.selective = true;
      else if (value == "full") s.recompute = true;
      else s.recompute = parse_flag(text, key, value);
    } else {
      fail(text, "option '" + key + "' does not apply to " + name);
    }
  }
  if (s.kind == StrategyKind::kTP1D && s.t < 1) fail(text, "t must be ≥ 1");
  if (!heads.empty()) {
    if (static_cast<int>(heads.size()) != s.t)
      fail(text, "heads= lists " + std::to_string(heads.size()) + " ranks for t=" + std::to_string(s.t));
    for (int h : heads)
      if (h < 1) fail(text, "every rank of heads= needs at least one head");
    // All equal is the even split: one spelling per strategy.
    if (std::all_of(heads.begin(), heads.end(), [&](int h) { return h == heads[0]; }))
      fail(text, "heads= with equal counts is the even split: leave heads= out");
    try {
      s.set_heads(heads);
    } catch (const std::length_error& e) {
      fail(text, e.what());
    }
  }
  if (s.kind == StrategyKind::kTP2D && (s.d1 < 1 || s.d2 < 1)) fail(text, "d1 and d2 must be ≥ 1");
  // degree() is d1·d2 in an int: bound the mesh like a single degree (6 digits), so that no
  // parsed strategy overflows it (d1=d2=999999 did).
  if (s.kind == StrategyKind::kTP2D && static_cast<long long>(s.d1) * s.d2 > kMaxDegree)
    fail(text, "d1·d2 = " + std::to_string(static_cast<long long>(s.d1) * s.d2) + " is too large");
  if (s.chunks < 1) fail(text, "chunks must be ≥ 1");
  return s;
}

}  // namespace shardgym
