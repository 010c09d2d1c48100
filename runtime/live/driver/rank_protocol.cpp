// Text forms of the rank protocol's messages (driver/rank_protocol.h).
#include "runtime/live/driver/rank_protocol.h"

#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace shardgym::live {
namespace {

// ---- "key=value" lines; values escape '\\' and '\n' ----

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

std::string unescape(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      o += s[i + 1] == 'n' ? '\n' : s[i + 1];
      ++i;
    } else {
      o += s[i];
    }
  }
  return o;
}

std::string num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", x);
  return buf;
}

std::string nums(const std::vector<double>& v) {
  std::string o;
  for (size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + num(v[i]);
  return o;
}

class Fields {
 public:
  Fields(const std::string& text, const char* what) : what_(what) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      const size_t eq = line.find('=');
      if (eq == std::string::npos) fail("line without '=': " + line);
      map_[line.substr(0, eq)] = unescape(line.substr(eq + 1));
    }
  }
  const std::string& str(const std::string& key) const {
    auto it = map_.find(key);
    if (it == map_.end()) fail("missing key '" + key + "'");
    return it->second;
  }
  double dbl(const std::string& key) const {
    try {
      return std::stod(str(key));
    } catch (const std::logic_error&) {
      fail("key '" + key + "' is not a number: " + str(key));
    }
  }
  int i32(const std::string& key) const { return static_cast<int>(dbl(key)); }
  uint64_t u64(const std::string& key) const {
    try {
      return std::stoull(str(key));
    } catch (const std::logic_error&) {
      fail("key '" + key + "' is not an unsigned integer: " + str(key));
    }
  }
  std::vector<double> dbls(const std::string& key) const {
    std::vector<double> v;
    std::istringstream in(str(key));
    std::string item;
    while (std::getline(in, item, ',')) v.push_back(std::stod(item));
    return v;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument(std::string(what_) + ": " + why);
  }

 private:
  const char* what_;
  std::map<std::string, std::string> map_;
};

void put(std::ostringstream& o, const char* key, const std::string& value) {
  o << key << '=' << escape(value) << '\n';
}

RankOp parse_op(const std::string& s) {
  if (s == "reset") return RankOp::kReset;
  if (s == "step") return RankOp::kStep;
  if (s == "eval") return RankOp::kEval;
  if (s == "stop") return RankOp::kStop;
  if (s == "abort") return RankOp::kAbort;
  if (s == "collectives") return RankOp::kCollectives;
  throw std::invalid_argument("RankCommand: unknown op '" + s + "'");
}

}  // namespace

const char* op_name(RankOp op) {
  switch (op) {
    case RankOp::kReset:
      return "reset";
    case RankOp::kStep:
      return "step";
    case RankOp::kEval:
      return "eval";
    case RankOp::kStop:
      return "stop";
    case RankOp::kAbort:
      return "abort";
    case RankOp::kCollectives:
      return "collectives";
  }
  return "?";
}

std::string LiveRankConfig::serialize() const {
  std::ostringstream o;
  put(o, "name", model.name);
  put(o, "layers", std::to_string(model.layers));
  put(o, "hidden", std::to_string(model.hidden));
  put(o, "heads", std::to_string(model.heads));
  put(o, "ffn", std::to_string(model.ffn));
  put(o, "kv_heads", std::to_string(model.kv_heads));
  put(o, "traits", std::string(model.rmsnorm ? "1" : "0") + (model.swiglu ? "1" : "0") +
                       (model.rotary ? "1" : "0") + (model.linear_bias ? "1" : "0") +
                       (model.dropout ? "1" : "0") + (model.tied_embeddings ? "1" : "0"));
  put(o, "seq", std::to_string(model.seq));
  put(o, "micro_batch", std::to_string(model.micro_batch));
  put(o, "global_batch", std::to_string(model.global_batch));
  put(o, "vocab", std::to_string(model.vocab));
  put(o, "dtype", dtype_name(model.dtype));
  put(o, "mixed_precision", model.mixed_precision ? "1" : "0");
  put(o, "world_size", std::to_string(world_size));
  put(o, "lr", num(lr));
  put(o, "weight_decay", num(weight_decay));
  put(o, "clip", num(clip));
  put(o, "threads", std::to_string(threads));
  put(o, "corpus", corpus);
  put(o, "timeout_s", num(timeout_s));
  put(o, "device", device);
  put(o, "backend", backend);
  put(o, "fault", fault);
  return o.str();
}

LiveRankConfig LiveRankConfig::parse(const std::string& text) {
  const Fields f(text, "LiveRankConfig");
  LiveRankConfig c;
  c.model.name = f.str("name");
  c.model.layers = f.i32("layers");
  c.model.hidden = f.i32("hidden");
  c.model.heads = f.i32("heads");
  c.model.ffn = f.i32("ffn");
  c.model.kv_heads = f.i32("kv_heads");
  // The block traits, one digit each in model_spec.h's order.
  const std::string traits = f.str("traits");
  if (traits.size() != 6 || traits.find_first_not_of("01") != std::string::npos)
    throw std::invalid_argument("LiveRankConfig: traits must be six 0/1 digits, not '" + traits + "'");
  c.model.rmsnorm = traits[0] == '1';
  c.model.swiglu = traits[1] == '1';
  c.model.rotary = traits[2] == '1';
  c.model.linear_bias = traits[3] == '1';
  c.model.dropout = traits[4] == '1';
  c.model.tied_embeddings = traits[5] == '1';
  c.model.seq = f.i32("seq");
  c.model.micro_batch = f.i32("micro_batch");
  c.model.global_batch = f.i32("global_batch");
  c.model.vocab = f.i32("vocab");
  c.model.dtype = parse_dtype(f.str("dtype"));
  c.model.mixed_precision = f.str("mixed_precision") == "1";
  c.world_size = f.i32("world_size");
  c.lr = f.dbl("lr");
  c.weight_decay = f.dbl("weight_decay");
  c.clip = f.dbl("clip");
  c.threads = f.i32("threads");
  c.corpus = f.str("corpus");
  c.timeout_s = f.dbl("timeout_s");
  c.device = f.str("device");
  c.backend = f.str("backend");
  c.fault = f.str("fault");
  return c;
}

std::string RankCommand::serialize() const {
  std::ostringstream o;
  put(o, "seq", std::to_string(seq));
  put(o, "op", op_name(op));
  put(o, "plan", plan);
  put(o, "seed", std::to_string(seed));
  put(o, "eval_index", std::to_string(eval_index));
  put(o, "micro_batches", std::to_string(micro_batches));
  put(o, "slowdown", nums(slowdown));
  put(o, "bytes", std::to_string(bytes));
  put(o, "reps", std::to_string(reps));
  return o.str();
}

RankCommand RankCommand::parse(const std::string& text) {
  const Fields f(text, "RankCommand");
  RankCommand c;
  c.seq = f.i32("seq");
  c.op = parse_op(f.str("op"));
  c.plan = f.str("plan");
  c.seed = f.u64("seed");
  c.eval_index = f.i32("eval_index");
  c.micro_batches = f.i32("micro_batches");
  c.slowdown = f.dbls("slowdown");
  c.bytes = static_cast<int64_t>(f.u64("bytes"));
  c.reps = f.i32("reps");
  return c;
}

namespace {
// RankReport's figures, each under its key: one list for the writer and the reader, so the
// two cannot drift apart.
constexpr std::pair<const char*, double RankReport::*> kReportFigures[] = {
    {"loss", &RankReport::loss},
    {"step_s", &RankReport::step_s},
    {"repartition_s", &RankReport::repartition_s},
    {"repartition_bytes", &RankReport::repartition_bytes},
    {"repartition_peak_bytes", &RankReport::repartition_peak_bytes},
    {"busy_s", &RankReport::busy_s},
    {"peak_bytes", &RankReport::peak_bytes},
    {"optimizer_s", &RankReport::optimizer_s},
};
constexpr std::pair<const char*, std::vector<double> RankReport::*> kReportSeries[] = {
    {"fwd_s", &RankReport::fwd_s},
    {"bwd_s", &RankReport::bwd_s},
    {"comm_s", &RankReport::comm_s},
};
}  // namespace

std::string RankReport::serialize() const {
  std::ostringstream o;
  put(o, "seq", std::to_string(seq));
  put(o, "rank", std::to_string(rank));
  put(o, "ok", ok ? "1" : "0");
  put(o, "error", error);
  put(o, "blocks_changed", std::to_string(blocks_changed));
  for (const auto& [key, field] : kReportFigures) put(o, key, num(this->*field));
  for (const auto& [key, field] : kReportSeries) put(o, key, nums(this->*field));
  return o.str();
}

RankReport RankReport::parse(const std::string& text) {
  const Fields f(text, "RankReport");
  RankReport r;
  r.seq = f.i32("seq");
  r.rank = f.i32("rank");
  r.ok = f.str("ok") == "1";
  r.error = f.str("error");
  r.blocks_changed = f.i32("blocks_changed");
  for (const auto& [key, field] : kReportFigures) r.*field = f.dbl(key);
  for (const auto& [key, field] : kReportSeries) r.*field = f.dbls(key);
  return r;
}

}  // namespace shardgym::live
