#include "datasets/trace_wire.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>

namespace shardgym {

namespace {

class Writer {
 public:
  template <typename T>
  void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    out_.append(s);
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    pod<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  T pod() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = count(1);
    return std::string(take(n), n);
  }
  template <typename T>
  std::vector<T> vec() {
    const uint64_t n = count(sizeof(T));
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));
    return v;
  }
  // A count of items of `item_bytes` each, which must fit in the bytes left.
  uint64_t count(uint64_t item_bytes) {
    const auto n = pod<uint64_t>();
    if (n > (in_.size() - pos_) / item_bytes) malformed();
    return n;
  }
  void finish() const {
    if (pos_ != in_.size()) malformed();
  }

 private:
  const char* take(uint64_t n) {
    if (n > in_.size() - pos_) malformed();
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  [[noreturn]] static void malformed() {
    throw std::runtime_error("malformed reply from the trace-reading process");
  }
  std::string_view in_;
  size_t pos_ = 0;
};

void put(Writer& w, const TraceEpisodeInfo& e) {
  w.str(e.name);
  w.pod<int32_t>(e.index);
  w.pod<uint8_t>(e.complete);
  w.pod<uint64_t>(e.seed);
  w.str(e.agent);
  w.str(e.backend);
  w.str(e.initial_plan);
  w.pod<int32_t>(e.steps);
  w.str(e.error);
  w.pod<int32_t>(e.error_step);
}

TraceEpisodeInfo get_info(Reader& r) {
  TraceEpisodeInfo e;
  e.name = r.str();
  e.index = r.pod<int32_t>();
  e.complete = r.pod<uint8_t>() != 0;
  e.seed = r.pod<uint64_t>();
  e.agent = r.str();
  e.backend = r.str();
  e.initial_plan = r.str();
  e.steps = r.pod<int32_t>();
  e.error = r.str();
  e.error_step = r.pod<int32_t>();
  return e;
}

}  // namespace

std::string encode(const TraceHeader& h) {
  Writer w;
  const TraceAttributes& a = h.attributes;
  for (const std::string* s : {&a.format, &a.env_id, &a.config, &a.git_sha, &a.created, &a.host,
                                 &a.config_path}) {
    w.str(*s);
  }
  w.pod<int32_t>(a.version);
  w.pod<uint64_t>(h.strategies.size());
  for (const auto& s : h.strategies) w.str(s);
  w.pod<uint64_t>(h.episodes.size());
  for (const auto& e : h.episodes) put(w, e);
  return w.take();
}

TraceHeader decode_header(std::string_view bytes) {
  Reader r(bytes);
  TraceHeader h;
  TraceAttributes& a = h.attributes;
  for (std::string* s : {&a.format, &a.env_id, &a.config, &a.git_sha, &a.created, &a.host,
                                 &a.config_path}) {
    *s = r.str();
  }
  a.version = r.pod<int32_t>();
  // Every string costs at least its 8-byte length; every episode more than 40 bytes.
  h.strategies.resize(r.count(8));
  for (auto& s : h.strategies) s = r.str();
  h.episodes.resize(r.count(40));
  for (auto& e : h.episodes) e = get_info(r);
  r.finish();
  return h;
}

std::string encode(const TraceEpisode& ep) {
  Writer w;
  put(w, ep.info);
  for (int v : {ep.obs_dim, ep.action_dim, ep.num_blocks, ep.world}) w.pod<int32_t>(v);
  w.vec(ep.observations);
  w.vec(ep.actions);
  w.vec(ep.rewards);
  w.vec(ep.terminations);
  w.vec(ep.truncations);
  for (const auto* v : {&ep.step_latency_s, &ep.repartition_s, &ep.repartition_bytes,
                        &ep.energy_j, &ep.tokens, &ep.loss, &ep.repartition_peak_bytes}) {
    w.vec(*v);
  }
  w.vec(ep.ok);
  w.vec(ep.oom);
  for (const auto* v : {&ep.peak_memory_bytes, &ep.block_fwd_s, &ep.block_bwd_s,
                        &ep.block_comm_s}) {
    w.vec(*v);
  }
  w.str(ep.latency_source);
  w.str(ep.memory_source);
  w.str(ep.energy_source);
  w.vec(ep.plans);
  w.pod<uint64_t>(ep.scalars.size());
  for (const auto& [name, values] : ep.scalars) {
    w.str(name);
    w.vec(values);
  }
  const Measurement& m = ep.initial;
  for (double v : {m.step_latency_s, m.repartition_s, m.repartition_bytes, m.energy_j, m.tokens,
                   m.loss}) {
    w.pod<double>(v);
  }
  for (const auto* v : {&m.block_fwd_s, &m.block_bwd_s, &m.block_comm_s, &m.peak_memory_bytes}) {
    w.vec(*v);
  }
  w.pod<uint8_t>(m.ok);
  w.pod<uint8_t>(m.oom);
  for (const std::string* s : {&m.error, &m.latency_source, &m.memory_source, &m.energy_source}) {
    w.str(*s);
  }
  return w.take();
}

TraceEpisode decode_episode(std::string_view bytes) {
  Reader r(bytes);
  TraceEpisode ep;
  ep.info = get_info(r);
  for (int* v : {&ep.obs_dim, &ep.action_dim, &ep.num_blocks, &ep.world}) *v = r.pod<int32_t>();
  ep.observations = r.vec<float>();
  ep.actions = r.vec<int32_t>();
  ep.rewards = r.vec<double>();
  ep.terminations = r.vec<uint8_t>();
  ep.truncations = r.vec<uint8_t>();
  for (auto* v : {&ep.step_latency_s, &ep.repartition_s, &ep.repartition_bytes, &ep.energy_j,
                  &ep.tokens, &ep.loss, &ep.repartition_peak_bytes}) {
    *v = r.vec<double>();
  }
  ep.ok = r.vec<uint8_t>();
  ep.oom = r.vec<uint8_t>();
  for (auto* v : {&ep.peak_memory_bytes, &ep.block_fwd_s, &ep.block_bwd_s, &ep.block_comm_s}) {
    *v = r.vec<double>();
  }
  ep.latency_source = r.str();
  ep.memory_source = r.str();
  ep.energy_source = r.str();
  ep.plans = r.vec<int32_t>();
  const uint64_t scalars = r.count(16);
  for (uint64_t i = 0; i < scalars; ++i) {
    std::string name = r.str();
    ep.scalars[name] = r.vec<double>();
  }
  Measurement& m = ep.initial;
  for (double* v : {&m.step_latency_s, &m.repartition_s, &m.repartition_bytes, &m.energy_j,
                    &m.tokens, &m.loss}) {
    *v = r.pod<double>();
  }
  for (auto* v : {&m.block_fwd_s, &m.block_bwd_s, &m.block_comm_s, &m.peak_memory_bytes}) {
    *v = r.vec<double>();
  }
  m.ok = r.pod<uint8_t>() != 0;
  m.oom = r.pod<uint8_t>() != 0;
  for (std::string* s : {&m.error, &m.latency_source, &m.memory_source, &m.energy_source}) {
    *s = r.str();
  }
  r.finish();
  // The arrays must agree with the dimensions they claim, as TraceReader's checks in the child
  // made them: callers index them by those dimensions.
  const auto n = ep.rewards.size();
  auto rows = [&](size_t size, int width) { return width >= 0 && size == n * size_t(width); };
  const bool shapes_agree =
      ep.obs_dim >= 0 && ep.observations.size() == (n + 1) * size_t(ep.obs_dim) &&
      rows(ep.actions.size(), ep.action_dim) && rows(ep.plans.size(), ep.num_blocks) &&
      rows(ep.peak_memory_bytes.size(), ep.world) && rows(ep.block_fwd_s.size(), ep.num_blocks) &&
      rows(ep.block_bwd_s.size(), ep.num_blocks) && rows(ep.block_comm_s.size(), ep.num_blocks);
  bool columns_agree = true;
  for (const auto* v : {&ep.terminations, &ep.truncations, &ep.ok, &ep.oom}) {
    columns_agree = columns_agree && v->size() == n;
  }
  for (const auto* v : {&ep.step_latency_s, &ep.repartition_s, &ep.repartition_bytes,
                        &ep.energy_j, &ep.tokens, &ep.loss, &ep.repartition_peak_bytes}) {
    columns_agree = columns_agree && v->size() == n;
  }
  for (const auto& [name, values] : ep.scalars) columns_agree = columns_agree && values.size() == n;
  if (!shapes_agree || !columns_agree || ep.info.steps != static_cast<int>(n)) {
    throw std::runtime_error("malformed reply from the trace-reading process (array sizes)");
  }
  return ep;
}

}  // namespace shardgym
