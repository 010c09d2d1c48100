#include "agents/search.h"

#include <algorithm>
#include <cmath>
#include <istream>
#include <limits>
#include <ostream>
#include <stdexcept>

#include "agents/agent_util.h"
#include "runtime/core/model_spec.h"

namespace shardgym {
namespace {

using namespace agents_detail;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using Allowed = std::vector<std::vector<int>>;

// Every parameter of the three agents, parsed and checked without an env (also what the
// config loader runs, through the registrations' parameter checks).
struct SearchOptions {
  int settle = 1;
  double restart = 0.05;
  int64_t budget = 32;                     // random-search
  double tol = 0;                          // greedy
  bool by_kind = false;                    // greedy, anneal
  double t0 = 0.05, decay = 0.98, t_min = 1e-3;  // anneal

  enum class Kind { kRandomSearch, kGreedy, kAnneal };
  static SearchOptions from_id(const ParsedId& id, Kind kind) {
    switch (kind) {
      case Kind::kRandomSearch: id.check_keys({"budget", "settle", "restart"}); break;
      case Kind::kGreedy: id.check_keys({"scope", "tol", "settle", "restart"}); break;
      case Kind::kAnneal: id.check_keys({"t0", "decay", "t_min", "scope", "settle", "restart"});
    }
    auto bad = [&](const std::string& what) { throw std::invalid_argument(id.name + ": " + what); };
    SearchOptions o;
    const double settle = id.get("settle", 1.0), budget = id.get("budget", 32.0);
    if (!(settle >= 0 && settle <= 1e6 && settle == std::floor(settle)))
      bad("settle must be a whole number >= 0");
    if (!(budget >= 1 && budget <= 1e12 && budget == std::floor(budget)))
      bad("budget must be a whole number >= 1");
    o.settle = static_cast<int>(settle);
    o.budget = static_cast<int64_t>(budget);
    o.restart = id.get("restart", o.restart);
    if (!(o.restart > 0)) bad("restart must be > 0");
    o.tol = id.get("tol", o.tol);
    if (!(o.tol >= 0)) bad("tol must be >= 0");
    const std::string scope = id.get("scope", std::string("block"));
    if (scope != "block" && scope != "kind")
      bad("scope must be block or kind, not '" + scope + "'");
    o.by_kind = scope == "kind";
    o.t0 = id.get("t0", o.t0);
    o.decay = id.get("decay", o.decay);
    o.t_min = id.get("t_min", o.t_min);
    if (!(o.t0 > 0) || !(o.decay > 0 && o.decay < 1) || !(o.t_min > 0))
      bad("need t0 > 0, 0 < decay < 1, t_min > 0");
    return o;
  }
};

// Proposal bookkeeping shared by the search agents: holding a changed plan for `settle`
// steps, episode boundaries, the mask, save/load of the common part. The search is over the
// blocks' strategies: with a pipeline component the stage boundaries are kept (choice 0).
class SearchAgent : public Agent {
 public:
  SearchAgent(const ParsedId& id, const SearchOptions& o, const EnvSpec& spec, uint64_t seed)
      : name_(id.to_string()),
        blocks_(spec.num_blocks),
        catalog_(spec.catalog_size),
        moves_(pipeline_moves(spec)),
        settle_(o.settle),
        restart_(o.restart),
        rng_(seed) {}
  std::string name() const override { return name_; }
  bool learns() const override { return true; }

  void begin_episode(Env&) override { new_episode(); }

  Action act(const Observation& obs, const std::vector<uint8_t>& mask,
             const std::vector<int32_t>& plan) override {
    Action current = current_action(plan, blocks_);
    if (!pending_.empty()) return with_keep(respect_mask(pending_, current, mask, catalog_));
    Allowed allowed = allowed_entries(mask, blocks_, catalog_, moves_);
    Action a = respect_mask(propose(current, allowed), current, mask, catalog_);
    pending_ = a;
    settle_left_ = a != current ? settle_ : 0;
    return with_keep(a);
  }

  void observe(const Transition& t) override {
    if (!pending_.empty()) {
      if (t.failed) {
        pending_.clear();  // an error (out of memory) is no reward to compare: reject
      } else if (t.action != with_keep(pending_)) {
        pending_.clear();  // the env was driven by someone else: nothing to judge
      } else if (settle_left_ > 0) {
        --settle_left_;
      } else {
        evaluate(pending_, t.reward);
        pending_.clear();
      }
    }
    if (t.terminated || t.truncated) new_episode();
  }

 protected:
  // The plan to try next (masked entries are replaced by the caller).
  virtual Action propose(const Action& current, const Allowed& allowed) = 0;
  virtual void evaluate(const Action& proposal, double reward) = 0;
  virtual void on_new_episode() = 0;
  virtual void write_search(std::ostream& out) const = 0;
  virtual void read_search(std::istream& in) = 0;

  void write_state(std::ostream& out) const override {
    write_rng(out, rng_);
    write_action(out, pending_);
    out << settle_left_ << '\n';
    write_search(out);
  }
  void read_state(std::istream& in) override {
    read_rng(in, rng_);
    pending_ = read_action(in, blocks_, catalog_, "pending plan");
    settle_left_ = static_cast<int>(read_int(in, 0, settle_, "settle count"));
    read_search(in);
  }
  // The rng (~6.6 KB of text), three plans, a few numbers and, for greedy, up to one move
  // per block and entry (each two integers): everything the config lets the state hold.
  size_t max_checkpoint_bytes() const override {
    return (size_t{1} << 16) + size_t{40} * blocks_ * (catalog_ + 3);
  }
  Action read_plan(std::istream& in, const char* what) const {
    return read_action(in, blocks_, catalog_, what);
  }

  // A random neighbour of `x`: one block (or, with by_kind, every block of one kind) moved to
  // another allowed entry. Returns x itself when no block has an alternative.
  Action neighbour(const Action& x, const Allowed& allowed, bool by_kind) {
    for (int attempt = 0; attempt < 8 * blocks_; ++attempt) {
      int b = uniform_int(rng_, blocks_);
      if (allowed[b].size() < 2) continue;
      int k = allowed[b][uniform_int(rng_, static_cast<int>(allowed[b].size()))];
      if (k == x[b]) continue;
      Action y = x;
      if (!by_kind) {
        y[b] = k;
        return y;
      }
      for (int c = b % 2; c < blocks_; c += 2) y[c] = k;
      if (fits(y, allowed)) return y;
    }
    return x;
  }

  // The env's action for the blocks' entries `a`: boundaries kept.
  Action with_keep(Action a) const {
    if (moves_ > 0) a.push_back(0);
    return a;
  }

  bool fits(const Action& a, const Allowed& allowed) const {
    for (int b = 0; b < blocks_; ++b) {
      bool ok = false;
      for (int k : allowed[b]) ok = ok || k == a[b];
      if (!ok) return false;
    }
    return true;
  }

  // Relative drift of a re-measured reward against the remembered one.
  bool drifted(double remembered, double now) const {
    return std::abs(now - remembered) > restart_ * std::max(std::abs(remembered), 1e-12);
  }

  std::string name_;
  int blocks_, catalog_, moves_;
  int settle_;
  double restart_;
  std::mt19937_64 rng_;

 private:
  void new_episode() {
    pending_.clear();
    settle_left_ = 0;
    on_new_episode();
  }

  Action pending_;
  int settle_left_ = 0;
};

class RandomSearch : public SearchAgent {
 public:
  RandomSearch(const ParsedId& id, const SearchOptions& o, const EnvSpec& spec, uint64_t seed)
      : SearchAgent(id, o, spec, seed), budget_(o.budget) {}

 protected:
  Action propose(const Action& current, const Allowed& allowed) override {
    if (best_.empty()) best_ = current;
    if (std::isnan(best_reward_) || tried_ >= budget_) return best_;
    ++tried_;
    Action a(blocks_);
    for (int b = 0; b < blocks_; ++b)
      a[b] = allowed[b].empty()
                 ? current[b]
                 : allowed[b][uniform_int(rng_, static_cast<int>(allowed[b].size()))];
    return a;
  }
  void evaluate(const Action& p, double r) override {
    // The best plan's own reward is replaced by its latest, every other only by a better one.
    if (p == best_ || std::isnan(best_reward_) || r > best_reward_) best_ = p, best_reward_ = r;
  }
  void on_new_episode() override { best_reward_ = kNaN; }
  void write_search(std::ostream& out) const override {
    write_action(out, best_);
    write_double(out, best_reward_);
    out << tried_ << '\n';
  }
  void read_search(std::istream& in) override {
    best_ = read_plan(in, "best plan");
    best_reward_ = read_reward(in, "best reward");
    tried_ = read_int(in, 0, budget_, "plans tried");
  }

 private:
  int64_t budget_;
  int64_t tried_ = 0;
  Action best_;
  double best_reward_ = kNaN;
};

class Greedy : public SearchAgent {
 public:
  Greedy(const ParsedId& id, const SearchOptions& o, const EnvSpec& spec, uint64_t seed)
      : SearchAgent(id, o, spec, seed), tol_(o.tol), by_kind_(o.by_kind) {}

 protected:
  Action propose(const Action& current, const Allowed& allowed) override {
    if (incumbent_.empty()) incumbent_ = current;
    if (std::isnan(reward_) || converged_) return incumbent_;
    while (true) {
      if (next_ >= moves_.size()) {
        if (!moves_.empty() && !improved_) {
          converged_ = true;
          settled_reward_ = reward_;
          return incumbent_;
        }
        new_sweep(allowed);
        if (moves_.empty()) return incumbent_;
      }
      auto [unit, k] = moves_[next_++];
      Action a = incumbent_;
      if (by_kind_) {
        for (int b = unit; b < blocks_; b += 2) a[b] = k;
      } else {
        a[unit] = k;
      }
      if (a != incumbent_ && fits(a, allowed)) return a;
    }
  }
  void evaluate(const Action& p, double r) override {
    if (p == incumbent_ || std::isnan(reward_)) {
      incumbent_ = p;
      reward_ = r;
      if (converged_ && drifted(settled_reward_, r)) {
        converged_ = false;  // conditions changed: search again from the incumbent
        moves_.clear();
        next_ = 0;
      }
    } else if (r > reward_ + tol_ * std::abs(reward_)) {
      incumbent_ = p;
      reward_ = r;
      improved_ = true;
    }
  }
  void on_new_episode() override { reward_ = kNaN; }
  void write_search(std::ostream& out) const override {
    write_action(out, incumbent_);
    write_double(out, reward_);
    write_double(out, settled_reward_);
    out << converged_ << ' ' << improved_ << ' ' << next_ << ' ' << moves_.size() << '\n';
    for (auto [u, k] : moves_) out << u << ' ' << k << '\n';
  }
  void read_search(std::istream& in) override {
    incumbent_ = read_plan(in, "incumbent plan");
    reward_ = read_reward(in, "reward");
    settled_reward_ = read_reward(in, "settled reward");
    converged_ = read_int(in, 0, 1, "converged flag") != 0;
    improved_ = read_int(in, 0, 1, "improved flag") != 0;
    // A sweep holds at most one move per unit and entry (new_sweep); propose() writes
    // incumbent_[unit] = k, so both are checked against the config here.
    const int units = by_kind_ ? std::min(2, blocks_) : blocks_;
    const int64_t next = read_int(in, 0, int64_t{units} * catalog_, "sweep position");
    const int64_t count = read_int(in, 0, int64_t{units} * catalog_, "sweep length");
    if (next > count) throw std::runtime_error("saved sweep position is past its end");
    if (count > 0 && incumbent_.empty())
      throw std::runtime_error("saved sweep without an incumbent plan");
    next_ = static_cast<size_t>(next);
    moves_.resize(static_cast<size_t>(count));
    for (auto& m : moves_) {
      m.first = static_cast<int>(read_int(in, 0, units - 1, "sweep unit"));
      m.second = static_cast<int>(read_int(in, 0, catalog_ - 1, "sweep entry"));
    }
  }

 private:
  // Every single-unit move from the incumbent, in a seeded random order.
  void new_sweep(const Allowed& allowed) {
    moves_.clear();
    next_ = 0;
    improved_ = false;
    const int units = by_kind_ ? std::min(2, blocks_) : blocks_;
    for (int u = 0; u < units; ++u)
      for (int k : allowed[u])
        if (k != incumbent_[u]) moves_.emplace_back(u, k);
    for (size_t i = moves_.size(); i > 1; --i)
      std::swap(moves_[i - 1], moves_[uniform_int(rng_, static_cast<int>(i))]);
  }

  double tol_;
  bool by_kind_ = false;
  Action incumbent_;
  double reward_ = kNaN, settled_reward_ = kNaN;
  bool converged_ = false, improved_ = false;
  std::vector<std::pair<int, int>> moves_;
  size_t next_ = 0;
};

class Anneal : public SearchAgent {
 public:
  Anneal(const ParsedId& id, const SearchOptions& o, const EnvSpec& spec, uint64_t seed)
      : SearchAgent(id, o, spec, seed),
        t0_(o.t0),
        decay_(o.decay),
        t_min_(o.t_min),
        temperature_(t0_),
        by_kind_(o.by_kind) {}

 protected:
  Action propose(const Action& current, const Allowed& allowed) override {
    if (x_.empty()) x_ = best_ = current;
    if (std::isnan(rx_)) return x_;
    if (temperature_ < t_min_) return best_;
    return neighbour(x_, allowed, by_kind_);
  }
  void evaluate(const Action& p, double r) override {
    if (std::isnan(rx_)) {
      x_ = p;
      rx_ = r;
      if (std::isnan(rbest_) || p == best_) best_ = p, rbest_ = r;
      return;
    }
    if (temperature_ < t_min_ && p == best_) {  // cold: re-measuring the best plan
      if (drifted(rbest_, r)) {
        temperature_ = t0_;  // conditions changed: reheat from the best plan
        x_ = best_;
        rx_ = r;
      }
      rbest_ = r;
      return;
    }
    double delta = (r - rx_) / std::max(std::abs(rx_), 1e-12);
    if (p == x_) {
      rx_ = r;
    } else if (delta >= 0 || uniform_real(rng_) < std::exp(delta / temperature_)) {
      x_ = p;
      rx_ = r;
    }
    if (p == best_) rbest_ = r;
    if (r > rbest_) best_ = p, rbest_ = r;
    temperature_ *= decay_;
  }
  void on_new_episode() override { rx_ = rbest_ = kNaN, x_ = best_; }
  void write_search(std::ostream& out) const override {
    write_action(out, x_);
    write_action(out, best_);
    write_double(out, rx_);
    write_double(out, rbest_);
    write_double(out, temperature_);
  }
  void read_search(std::istream& in) override {
    x_ = read_plan(in, "current plan");
    best_ = read_plan(in, "best plan");
    rx_ = read_reward(in, "current reward");
    rbest_ = read_reward(in, "best reward");
    temperature_ = read_double(in);
    if (!(temperature_ >= 0 && temperature_ <= t0_))
      throw std::runtime_error("saved temperature is outside [0, t0]");
  }

 private:
  double t0_, decay_, t_min_, temperature_;
  bool by_kind_ = false;
  Action x_, best_;
  double rx_ = kNaN, rbest_ = kNaN;
};

}  // namespace

using Kind = SearchOptions::Kind;

std::unique_ptr<Agent> make_random_search_agent(const ParsedId& id, const EnvSpec& spec,
                                                uint64_t seed) {
  return std::make_unique<RandomSearch>(id, SearchOptions::from_id(id, Kind::kRandomSearch), spec,
                                        seed);
}

std::unique_ptr<Agent> make_greedy_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed) {
  return std::make_unique<Greedy>(id, SearchOptions::from_id(id, Kind::kGreedy), spec, seed);
}

std::unique_ptr<Agent> make_anneal_agent(const ParsedId& id, const EnvSpec& spec, uint64_t seed) {
  return std::make_unique<Anneal>(id, SearchOptions::from_id(id, Kind::kAnneal), spec, seed);
}

void check_random_search_params(const ParsedId& id) {
  SearchOptions::from_id(id, Kind::kRandomSearch);
}
void check_greedy_params(const ParsedId& id) { SearchOptions::from_id(id, Kind::kGreedy); }
void check_anneal_params(const ParsedId& id) { SearchOptions::from_id(id, Kind::kAnneal); }

}  // namespace shardgym
