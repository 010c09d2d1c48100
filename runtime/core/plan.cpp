#include "runtime/core/plan.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "runtime/core/catalog.h"
#include "runtime/core/cost.h"
#include "runtime/core/data_shares.h"
#include "runtime/core/text.h"

namespace shardgym {
namespace {

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

int pipeline_int(const std::string& text, const std::string& key, const std::string& value) {
  bool digits = !value.empty();
  for (char c : value) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits && value.size() > 6)
    throw std::invalid_argument("pipeline '" + text + "': " + key + "=" + value +
                                " is larger than 999999");
  if (!digits || std::stoi(value) < 1)
    throw std::invalid_argument("pipeline '" + text + "': " + key + "=" + value +
                                " is not a positive integer");
  return std::stoi(value);
}

}  // namespace

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::kGPipe: return "gpipe";
    case Schedule::k1F1B: return "1f1b";
    case Schedule::kInterleaved: return "interleaved";
  }
  return "?";
}

bool Pipeline::is_default() const {
  return stages == 1 && micro_batches <= 1 && schedule == Schedule::k1F1B &&
         virtual_stages == 1 && split.empty();
}

bool Pipeline::operator==(const Pipeline& o) const {
  // Without a pipeline, m = 0 means one micro-batch (plan_micro_batches).
  auto norm = [](const Pipeline& p) { return p.stages == 1 && p.micro_batches == 0 ? 1 : p.micro_batches; };
  return stages == o.stages && norm(*this) == norm(o) && schedule == o.schedule &&
         virtual_stages == o.virtual_stages && split == o.split && shares == o.shares &&
         context == o.context;
}

std::vector<int> Pipeline::layers_per_stage(int layers) const {
  if (!split.empty()) return split;
  const int p = std::max(1, stages);
  std::vector<int> out(p, layers / p);
  for (int s = p - layers % p; s < p; ++s) ++out[s];  // the remainder to the last stages
  return out;
}

Pipeline Pipeline::moved(int boundary, int delta, int layers) const {
  std::vector<int> per = layers_per_stage(layers);
  if (boundary < 0 || boundary + 1 >= static_cast<int>(per.size()))
    throw std::out_of_range("pipeline: boundary " + std::to_string(boundary) + " outside [0, " +
                            std::to_string(static_cast<int>(per.size()) - 1) + ")");
  per[boundary] += delta;
  per[boundary + 1] -= delta;
  Pipeline out = *this;
  out.split.clear();
  if (per != out.layers_per_stage(layers)) out.split = std::move(per);
  return out;
}

std::string Pipeline::to_string() const {
  std::string out = "pp(";
  auto add = [&](const std::string& kv) { out += (out.size() > 3 ? "," : "") + kv; };
  if (stages != 1) add("p=" + std::to_string(stages));
  if (micro_batches > 0) add("m=" + std::to_string(micro_batches));
  if (schedule != Schedule::k1F1B) add(std::string("schedule=") + schedule_name(schedule));
  if (virtual_stages != 1) add("v=" + std::to_string(virtual_stages));
  if (!split.empty()) {
    std::string parts;
    for (int n : split) parts += (parts.empty() ? "" : "/") + std::to_string(n);
    add("split=" + parts);
  }
  return out + ")";
}

Pipeline Pipeline::parse(const std::string& raw) {
  const std::string text = trim(raw);
  if (text.rfind("pp(", 0) != 0 || text.back() != ')')
    throw std::invalid_argument("pipeline '" + text + "': expected pp(p=4,m=16,...)");
  Pipeline p;
  bool have_v = false;
  std::set<std::string> seen;
  for (const auto& item : shardgym::split(text.substr(3, text.size() - 4), ',')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("pipeline '" + text + "': option '" + item + "' is not key=value");
    const std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    if (!seen.insert(key).second)
      throw std::invalid_argument("pipeline '" + text + "': option '" + key + "' given twice");
    if (key == "p") {
      p.stages = pipeline_int(text, key, value);
    } else if (key == "m") {
      p.micro_batches = pipeline_int(text, key, value);
    } else if (key == "v") {
      p.virtual_stages = pipeline_int(text, key, value);
      have_v = true;
    } else if (key == "schedule") {
      if (value == "gpipe") p.schedule = Schedule::kGPipe;
      else if (value == "1f1b") p.schedule = Schedule::k1F1B;
      else if (value == "interleaved") p.schedule = Schedule::kInterleaved;
      else
        throw std::invalid_argument("pipeline '" + text + "': schedule '" + value +
                                    "' is not gpipe, 1f1b or interleaved");
    } else if (key == "split") {
      for (const auto& n : shardgym::split(value, '/')) p.split.push_back(pipeline_int(text, key, n));
    } else {
      throw std::invalid_argument("pipeline '" + text + "': unknown option '" + key +
                                  "' (p, m, schedule, v, split)");
    }
  }
  if (have_v && p.virtual_stages > 1 && p.schedule != Schedule::kInterleaved)
    throw std::invalid_argument("pipeline '" + text + "': v > 1 needs schedule=interleaved");
  if (!p.split.empty() && static_cast<int>(p.split.size()) != p.stages)
    throw std::invalid_argument("pipeline '" + text + "': split has " +
                                std::to_string(p.split.size()) + " stages, p=" +
                                std::to_string(p.stages));
  return p;
}

std::vector<int> Plan::block_stages() const {
  const std::vector<int> per = pipeline.layers_per_stage(size() / 2);
  std::vector<int> out;
  out.reserve(blocks.size());
  for (int s = 0; s < static_cast<int>(per.size()); ++s)
    for (int i = 0; i < 2 * per[s] && static_cast<int>(out.size()) < size(); ++i) out.push_back(s);
  while (static_cast<int>(out.size()) < size()) out.push_back(pipeline.stages - 1);
  return out;
}

namespace {

// The sequences one replica of the plan's largest data-parallel degree takes per iteration
// (0 when the global batch does not split over those replicas), and that degree. DP is the
// lowest-degree block's replica count, so every block's share of a micro-batch is a whole
// number of sequences.
struct ReplicaShare {
  int dp = 1, sequences = 0;
};
ReplicaShare largest_dp_share(const Plan& plan, const ModelSpec& model, int world) {
  const int stage_world = std::max(1, world / std::max(1, plan.pipeline.stages));
  int t_min = 0;
  for (const auto& s : plan.blocks) t_min = t_min == 0 ? s.degree() : std::min(t_min, s.degree());
  ReplicaShare r;
  // With context parallelism c replicas share each sequence: DP is the rest (Megatron-LM's
  // data-parallel size excludes the context-parallel one).
  r.dp = std::max(1, stage_world / std::max(1, t_min) / std::max(1, plan.pipeline.context));
  const int g = effective_global_batch(model, world);
  r.sequences = g % r.dp == 0 ? g / r.dp : 0;
  return r;
}

}  // namespace

int plan_micro_batches(const Plan& plan, const ModelSpec& model, int world) {
  if (plan.pipeline.micro_batches > 0) return plan.pipeline.micro_batches;
  if (model.global_batch <= 0) {
    // No global batch given (it is micro_batch × P): one micro-batch without a pipeline part;
    // with one, m = micro_batch · (P/p) / (micro_batch · DP) at the largest degree, as before.
    if (plan.pipeline.is_default()) return 1;
    const int stage_world = std::max(1, world / std::max(1, plan.pipeline.stages));
    int t_max = 1;
    for (const auto& s : plan.blocks) t_max = std::max(t_max, s.degree());
    return std::max(1, std::min(t_max, stage_world));
  }
  // Megatron-LM's rule, m = G / (micro_batch · DP), for every plan (docs/design.md §3,
  // "Micro-batches"). A replica whose share is at most one micro-batch runs it at once; a
  // share that is no whole number of micro-batches is refused (micro_batch_split_reason).
  const int per_replica = largest_dp_share(plan, model, world).sequences;
  const int mb = model.micro_batch;
  if (mb <= 0 || per_replica <= mb || per_replica % mb != 0) return 1;
  return per_replica / mb;
}

std::string micro_batch_split_reason(const Plan& plan, const ModelSpec& model, int world) {
  if (plan.pipeline.micro_batches > 0 || model.micro_batch <= 0 || model.global_batch <= 0)
    return "";
  const ReplicaShare r = largest_dp_share(plan, model, world);
  if (r.sequences <= model.micro_batch || r.sequences % model.micro_batch == 0) return "";
  return "the global batch of " + std::to_string(effective_global_batch(model, world)) +
         " sequences gives each of " + std::to_string(r.dp) + " data-parallel replicas " +
         std::to_string(r.sequences) + ", not a whole number of micro-batches of " +
         std::to_string(model.micro_batch) + " (model.micro_batch)";
}

ModelSpec context_model(const ModelSpec& model, int context, int world) {
  if (context <= 1) return model;
  ModelSpec m = model;
  m.global_batch = effective_global_batch(model, world) * context;
  m.seq = model.seq / context;
  m.context_parallel = context;
  return m;
}

std::string context_invalid_reason(const Plan& plan, const ModelSpec& model, int world) {
  const int c = plan.pipeline.context;
  if (c == 1) return "";
  std::ostringstream why;
  const int stage_world = world / std::max(1, plan.pipeline.stages);
  if (c < 1 || c > stage_world) {
    why << "@cp(" << c << "): context parallelism over " << c << " ranks in a stage of "
        << stage_world;
  } else if (!plan.pipeline.shares.empty()) {
    why << "@cp(" << c << ") with uneven data shares @dp(w=...) is not modelled";
  } else if (!model.flash_attention) {
    // Megatron-Core runs context parallelism in Transformer Engine's fused attention only.
    why << "@cp(" << c << "): context parallelism needs model.flash_attention";
  } else if (model.global_batch <= 0) {
    why << "@cp(" << c << "): context parallelism needs model.global_batch";
  } else if (model.seq % (2 * c) != 0) {
    // Causal load balance: each rank takes chunks i and 2c−1−i of 2c equal chunks.
    why << "@cp(" << c << "): seq=" << model.seq << " is not 2·c=" << 2 * c << " equal chunks";
  }
  // Every block's replicas must group into c: strategy_invalid_reason checks it per block
  // with the context model (catalog.h), so the action mask knows it too.
  return why.str();
}

ModelSpec micro_batch_model(const ModelSpec& model, int micro_batches, int world) {
  ModelSpec m = model;
  const int g = effective_global_batch(model, world);
  m.global_batch = std::max(1, g / std::max(1, micro_batches));
  return m;
}

Plan Plan::uniform(const Strategy& s, int num_blocks) {
  Plan plan;
  plan.blocks.assign(num_blocks, s);
  return plan;
}

std::string Plan::to_string() const {
  std::string pp = pipeline.is_default() ? "" : "@" + pipeline.to_string();
  if (!pipeline.shares.empty()) pp += "@dp(" + shares_to_string(pipeline.shares) + ")";
  if (pipeline.context != 1) pp += "@cp(" + std::to_string(pipeline.context) + ")";
  if (blocks.empty()) return pp;
  bool same = true;
  for (const auto& b : blocks) same = same && b == blocks.front();
  if (same) return "uniform:" + blocks.front().to_string() + pp;
  bool alternating = size() % 2 == 0;
  for (int i = 2; alternating && i < size(); ++i) alternating = blocks[i] == blocks[i % 2];
  if (alternating)
    return "attn=" + blocks[0].to_string() + "|mlp=" + blocks[1].to_string() + pp;
  std::string out;
  for (int i = 0; i < size();) {
    int j = i;
    while (j < size() && blocks[j] == blocks[i]) ++j;
    if (!out.empty()) out += ";";
    if (j - i > 1) out += std::to_string(j - i) + "*";
    out += blocks[i].to_string();
    i = j;
  }
  return out + pp;
}

Plan Plan::parse(const std::string& raw, int num_blocks) {
  std::string text = trim(raw);
  const size_t at = text.find('@');
  if (at != std::string::npos) {
    Plan p = parse(text.substr(0, at), num_blocks);
    // Plan-level parts, each at most once: @pp(...), @dp(w=...) and @cp(c).
    bool have_pp = false, have_dp = false, have_cp = false;
    std::vector<int> shares;
    int context = 1;
    for (const std::string& part : split(text.substr(at + 1), '@')) {
      if (part.rfind("cp(", 0) == 0 && part.back() == ')') {
        if (have_cp) throw std::invalid_argument("plan '" + text + "': more than one @cp(...)");
        const std::string c = part.substr(3, part.size() - 4);
        const bool digits = !c.empty() && c.size() <= 6 &&
                            c.find_first_not_of("0123456789") == std::string::npos;
        context = digits ? std::stoi(c) : 0;
        if (context < 1)
          throw std::invalid_argument("plan '" + text + "': @cp(" + c +
                                      ") needs a positive number of ranks, e.g. @cp(2)");
        have_cp = true;
      } else if (part.rfind("dp(", 0) == 0 && part.back() == ')') {
        if (have_dp) throw std::invalid_argument("plan '" + text + "': more than one @dp(...)");
        shares = parse_shares(part.substr(3, part.size() - 4));
        have_dp = true;
      } else {
        if (have_pp) throw std::invalid_argument("plan '" + text + "': more than one @pp(...)");
        p.pipeline = Pipeline::parse(part);
        have_pp = true;
      }
    }
    p.pipeline.shares = std::move(shares);
    p.pipeline.context = context;
    return p;
  }
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
    // Checked before the blocks are made: `999999*dp;999999*dp;...` would otherwise allocate
    // gigabytes before the count is compared.
    if (repeat > num_blocks - p.size())
      throw std::invalid_argument("plan has more than " + std::to_string(num_blocks) +
                                  " blocks (entry " + std::to_string(entry) +
                                  "); the model has " + std::to_string(num_blocks) +
                                  " (2 per layer: attention, MLP)");
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
  if (std::string why = parts_invalid_reason(model, world); !why.empty()) return why;
  const Pipeline& pp = pipeline;
  const int m = plan_micro_batches(*this, model, world);
  const ModelSpec mb = micro_batch_model(context_model(model, pp.context, world), m, world);
  const int stage_world = world / pp.stages;
  for (int b = 0; b < size(); ++b) {
    const std::string why = strategy_invalid_reason(blocks[b], mb, ModelSpec::block_kind(b), stage_world);
    if (!why.empty())
      return "block " + std::to_string(b) + " (layer " + std::to_string(b / 2) + " " +
             block_kind_name(ModelSpec::block_kind(b)) + "): " + why;
  }
  return "";
}

std::string Plan::parts_invalid_reason(const ModelSpec& model, int world) const {
  const Pipeline& pp = pipeline;
  std::ostringstream why_pp;
  if (pp.stages < 1 || world % pp.stages != 0)
    why_pp << "pipeline: p=" << pp.stages << " does not divide the world of " << world << " ranks";
  else if (pp.stages > model.layers)
    why_pp << "pipeline: p=" << pp.stages << " stages for " << model.layers << " layers";
  else if (pp.schedule != Schedule::kInterleaved && pp.virtual_stages != 1)
    why_pp << "pipeline: v=" << pp.virtual_stages << " needs schedule=interleaved";
  if (why_pp.str().empty()) {
    const std::vector<int> per = pp.layers_per_stage(model.layers);
    int sum = 0;
    for (int n : per) sum += n;
    if (static_cast<int>(per.size()) != pp.stages)
      why_pp << "pipeline: split lists " << per.size() << " stages, p=" << pp.stages;
    else if (sum != model.layers)
      why_pp << "pipeline: split adds up to " << sum << " layers, the model has " << model.layers;
    for (size_t s = 0; why_pp.str().empty() && s < per.size(); ++s) {
      if (per[s] < 1) why_pp << "pipeline: stage " << s << " has no layer";
      else if (per[s] % pp.virtual_stages != 0)
        why_pp << "pipeline: stage " << s << " has " << per[s] << " layers, not divisible into v="
               << pp.virtual_stages << " virtual stages";
    }
  }
  if (why_pp.str().empty()) why_pp << context_invalid_reason(*this, model, world);
  if (why_pp.str().empty()) why_pp << micro_batch_split_reason(*this, model, world);
  const int m = plan_micro_batches(*this, model, world);
  const int g = effective_global_batch(model, world);
  if (why_pp.str().empty() && g % m != 0)
    why_pp << "pipeline: m=" << m << " micro-batches do not divide the global batch of " << g;
  if (why_pp.str().empty() && pp.schedule == Schedule::kInterleaved && m % pp.stages != 0)
    why_pp << "pipeline: the interleaved schedule needs m (" << m << ") divisible by p (" << pp.stages << ")";
  if (!why_pp.str().empty()) return why_pp.str();
  return shares_invalid_reason(*this, model, world);
}

}  // namespace shardgym
