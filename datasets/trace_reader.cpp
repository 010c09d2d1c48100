#include "datasets/trace_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <sys/stat.h>

#include "datasets/global_heap_check.h"
#include "datasets/h5_util.h"
#include "datasets/isolated_read.h"
#include "datasets/trace_wire.h"

namespace shardgym {

namespace {

// The HDF5 side of reading, run in the child process that read_isolated() forks. `budget` is
// the most bytes of data the file may make it allocate (see read_budget()).
struct FileReader {
  FileReader(std::string p, uint64_t budget) : path(std::move(p)), err(path), budget(budget) {}
  std::string path;
  h5::H5Error err;
  h5::H5Id file;
  uint64_t budget;
  TraceHeader header;

  void open();
  void read_root();
  void read_strategies();
  void list_episodes();
  TraceEpisode read(const TraceEpisodeInfo& info);
  // The episode's reset measurement (its group's `reset` attributes).
  Measurement read_reset(hid_t episode, const std::string& name);
  // Takes `elements` × `bytes_each` out of the budget, or fails naming `what`.
  void charge(const std::string& what, uint64_t elements, uint64_t bytes_each);
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// "episode_12" -> 12, anything else -> -1.
int episode_index(const std::string& name) {
  const std::string prefix = "episode_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return -1;
  std::string digits = name.substr(prefix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoi(digits);
}

std::string shape_text(const std::vector<hsize_t>& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + ")";
}

// Deflate, the only filter the writer uses, expands data at most 1032:1 (zlib's technical
// details, "Maximum compression factor"); so a file of S bytes holds at most about 1032·S
// bytes of data, whatever its datasets declare. Reads are also capped at 4 GiB each.
constexpr uint64_t kDeflateMaxRatio = 1032;
constexpr uint64_t kMaxReadBytes = 4ull << 30;

uint64_t read_budget(uint64_t file_bytes) {
  return std::min(kMaxReadBytes, kDeflateMaxRatio * file_bytes + (1u << 20));
}

IsolationLimits isolation_limits(uint64_t budget) {
  IsolationLimits limits;
  limits.max_reply_bytes = budget + (64u << 20);              // data plus the encoding's lengths
  limits.max_extra_memory_bytes = 2 * budget + (512u << 20);  // data, its copy, HDF5's caches
  if (const char* t = std::getenv("SHARDGYM_TRACE_READ_TIMEOUT_S")) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end != t && *end == '\0' && v > 0 && v <= 86400) limits.timeout_s = v;
  }
  return limits;
}

}  // namespace

void FileReader::charge(const std::string& what, uint64_t elements, uint64_t bytes_each) {
  if (elements > budget / bytes_each) {
    err.fail(what + " declares " + std::to_string(elements) + " elements of " +
             std::to_string(bytes_each) + " bytes, more than this file can hold (at most " +
             std::to_string(budget) +
             " bytes of data left for this read: 1032 × the file "
             "size, deflate's largest expansion, capped at 4 GiB)");
  }
  budget -= elements * bytes_each;
}

void FileReader::open() {
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 < 0) err.fail_hdf5("cannot read the file");
  if (is_hdf5 == 0) {
    err.fail(
        "not an HDF5 file (no HDF5 signature in its first bytes; it may be empty, cut "
        "short or of another format)");
  }
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    std::string why = h5::H5Error::stack_text();
    if (contains(why, "truncated file")) {
      err.fail("the file is truncated (shorter than its HDF5 superblock says): " + why);
    }
    if (contains(why, "lock")) {
      err.fail("the file is locked, probably by a process still writing it (" + why +
               "); wait for it, or set HDF5_USE_FILE_LOCKING=FALSE to read it anyway");
    }
    err.fail("HDF5 cannot open it: " + why);
  }
  file = h5::H5Id(id);
  h5::require_only_hard_links(err, file.get());
}

void FileReader::read_root() {
  hid_t root = file.get();
  if (!h5::has_attr(root, "format")) {
    err.fail("not a shardgym trace (the root group has no 'format' attribute)");
  }
  TraceAttributes& attributes = header.attributes;
  attributes.format = h5::read_attr_string(err, root, "format");
  if (attributes.format != kTraceFormat) {
    err.fail("not a shardgym trace (format = '" + attributes.format + "', expected '" +
             kTraceFormat + "')");
  }
  int64_t version = h5::read_attr_int64(err, root, "version");
  if (version < 1 || version > kTraceVersion) {
    err.fail("unsupported trace schema version " + std::to_string(version) +
             " (this build reads version " + std::to_string(kTraceVersion) + ")");
  }
  attributes.version = static_cast<int>(version);
  attributes.env_id = h5::read_attr_string(err, root, "env_id");
  attributes.config = h5::read_attr_string(err, root, "config");
  attributes.git_sha = h5::read_attr_string(err, root, "git_sha");
  attributes.created = h5::read_attr_string(err, root, "created");
  attributes.host = h5::read_attr_string(err, root, "host");
  if (h5::has_attr(root, "config_path")) {
    attributes.config_path = h5::read_attr_string(err, root, "config_path");
  }
}

void FileReader::read_strategies() {
  if (H5Lexists(file.get(), "strategies", H5P_DEFAULT) <= 0) err.fail("missing /strategies");
  h5::H5Id dset = h5::open_dataset(err, file.get(), "strategies");
  auto dims = h5::dataset_shape(err, dset.get(), "/strategies");
  if (dims.size() != 1) err.fail("/strategies has shape " + shape_text(dims) + ", want (S)");
  charge("/strategies", dims[0], h5::kStrategyStringBytes);
  h5::H5Id type = h5::strategy_string_type(err);
  std::vector<char> buf(dims[0] * h5::kStrategyStringBytes);
  if (dims[0] > 0) {
    err.check(H5Dread(dset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
              "read /strategies");
  }
  for (hsize_t i = 0; i < dims[0]; ++i) {
    const char* s = buf.data() + i * h5::kStrategyStringBytes;
    header.strategies.emplace_back(s, strnlen(s, h5::kStrategyStringBytes));
  }
}

void FileReader::list_episodes() {
  if (H5Lexists(file.get(), "episodes", H5P_DEFAULT) <= 0) err.fail("missing /episodes group");
  h5::H5Id group(err.check_id(H5Gopen2(file.get(), "episodes", H5P_DEFAULT), "open /episodes"));
  for (const std::string& name : h5::link_names(err, group.get(), "/episodes")) {
    int index = episode_index(name);
    if (index < 0) continue;  // not ours: ignore rather than refuse the whole file
    TraceEpisodeInfo info;
    info.name = name;
    info.index = index;
    try {
      h5::H5Id g(err.check_id(H5Gopen2(group.get(), name.c_str(), H5P_DEFAULT), "open " + name));
      info.complete =
          h5::has_attr(g.get(), "complete") && h5::read_attr_int64(err, g.get(), "complete") == 1;
      info.seed = h5::read_attr_uint64(err, g.get(), "seed");
      info.agent = h5::read_attr_string(err, g.get(), "agent");
      info.backend = h5::read_attr_string(err, g.get(), "backend");
      info.initial_plan = h5::read_attr_string(err, g.get(), "initial_plan");
      if (info.complete) {
        info.steps = static_cast<int>(h5::read_attr_int64(err, g.get(), "steps"));
        info.error = h5::read_attr_string(err, g.get(), "error");
        info.error_step = static_cast<int>(h5::read_attr_int64(err, g.get(), "error_step"));
      }
    } catch (const std::runtime_error& e) {
      info.complete = false;
      info.error = e.what();
    }
    header.episodes.push_back(std::move(info));
  }
  std::sort(header.episodes.begin(), header.episodes.end(),
            [](const TraceEpisodeInfo& a, const TraceEpisodeInfo& b) { return a.index < b.index; });
}

struct TraceReader::Impl {
  std::string path;
  uint64_t budget = 0;
  IsolationLimits limits;
  TraceHeader header;
};

namespace {

// A trace path must name a regular file: a FIFO or a device would block or never end.
uint64_t regular_file_size(const h5::H5Error& err, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) err.fail("no such file");
    err.fail(std::string("cannot read it: ") + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) err.fail("is a directory, not a trace file");
  if (!S_ISREG(st.st_mode)) err.fail("is not a regular file (a FIFO, socket or device?)");
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

namespace {

// Runs `body` on the opened file in the reading child; returns what it encoded.
template <typename Body>
std::string read_in_child(const std::string& path, uint64_t budget, const IsolationLimits& limits,
                          Body body) {
  return read_isolated("trace '" + path + "'", limits, [&](std::string& out) {
    h5::silence_hdf5();
    FileReader f(path, budget);
    f.open();
    out = body(f);
  });
}

}  // namespace

TraceReader::TraceReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  const h5::H5Error err(path);
  impl_->budget = read_budget(regular_file_size(err, path));
  // Global heap objects HDF5 1.10 would loop on or copy out of bounds from: refused here,
  // before any child parses the file (see global_heap_check.h).
  if (const std::string why = check_global_heaps_of_file(path); !why.empty()) {
    err.fail("the file is damaged: " + why +
             " (HDF5 1.10 would loop or read out of bounds "
             "on it, so it was not parsed)");
  }
  impl_->limits = isolation_limits(impl_->budget);
  const std::string bytes = read_in_child(path, impl_->budget, impl_->limits, [](FileReader& f) {
    f.read_root();
    f.read_strategies();
    f.list_episodes();
    return encode(f.header);
  });
  try {
    impl_->header = decode_header(bytes);
  } catch (const std::runtime_error& e) {
    err.fail(e.what());
  }
}

TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

const std::string& TraceReader::path() const { return impl_->path; }
const TraceAttributes& TraceReader::attributes() const { return impl_->header.attributes; }
const std::vector<std::string>& TraceReader::strategies() const { return impl_->header.strategies; }
const std::vector<TraceEpisodeInfo>& TraceReader::episodes() const {
  return impl_->header.episodes;
}

int TraceReader::complete_episodes() const {
  const auto& eps = impl_->header.episodes;
  return static_cast<int>(
      std::count_if(eps.begin(), eps.end(), [](const TraceEpisodeInfo& e) { return e.complete; }));
}

TraceEpisode TraceReader::read_episode(int index) const {
  const h5::H5Error err(impl_->path);
  for (const auto& info : impl_->header.episodes) {
    if (info.index != index) continue;
    if (!info.complete) {
      err.fail(info.name + " is incomplete (the writer stopped before its end" +
               (info.error.empty() ? std::string(")") : "; " + info.error + ")"));
    }
    const std::string bytes = read_in_child(impl_->path, impl_->budget, impl_->limits,
                                            [&](FileReader& f) { return encode(f.read(info)); });
    try {
      return decode_episode(bytes);
    } catch (const std::runtime_error& e) {
      err.fail(e.what());
    }
  }
  err.fail("no episode_" + std::to_string(index) + " (the trace has " +
           std::to_string(impl_->header.episodes.size()) + " episodes)");
}

Measurement FileReader::read_reset(hid_t episode, const std::string& name) {
  h5::H5Id rg(err.check_id(H5Gopen2(episode, "reset", H5P_DEFAULT), "open " + name + "/reset"));
  Measurement m;
  m.step_latency_s = h5::read_attr_double(err, rg.get(), "step_latency_s");
  m.repartition_s = h5::read_attr_double(err, rg.get(), "repartition_s");
  m.repartition_bytes = h5::read_attr_double(err, rg.get(), "repartition_bytes");
  m.energy_j = h5::read_attr_double(err, rg.get(), "energy_j");
  m.tokens = h5::read_attr_double(err, rg.get(), "tokens");
  m.loss = h5::read_attr_double(err, rg.get(), "loss");
  m.block_fwd_s = h5::read_attr_doubles(err, rg.get(), "block_fwd_s");
  m.block_bwd_s = h5::read_attr_doubles(err, rg.get(), "block_bwd_s");
  m.block_comm_s = h5::read_attr_doubles(err, rg.get(), "block_comm_s");
  m.peak_memory_bytes = h5::read_attr_doubles(err, rg.get(), "peak_memory_bytes");
  m.ok = h5::read_attr_int64(err, rg.get(), "ok") != 0;
  m.oom = h5::read_attr_int64(err, rg.get(), "oom") != 0;
  m.error = h5::read_attr_string(err, rg.get(), "error");
  m.latency_source = h5::read_attr_string(err, rg.get(), "latency_source");
  m.memory_source = h5::read_attr_string(err, rg.get(), "memory_source");
  m.energy_source = h5::read_attr_string(err, rg.get(), "energy_source");
  return m;
}

TraceEpisode FileReader::read(const TraceEpisodeInfo& info) {
  TraceEpisode ep;
  ep.info = info;
  const std::string where = "/episodes/" + info.name;
  h5::H5Id g(err.check_id(H5Gopen2(file.get(), where.c_str(), H5P_DEFAULT), "open " + where));
  hid_t gid = g.get();
  auto shape_of = [&](const std::string& name) {
    if (H5Lexists(gid, name.c_str(), H5P_DEFAULT) <= 0) {
      err.fail(info.name + ": missing dataset '" + name + "'");
    }
    h5::H5Id d = h5::open_dataset(err, gid, name);
    return h5::dataset_shape(err, d.get(), info.name + "/" + name);
  };
  const auto rewards_shape = shape_of("rewards");
  const hsize_t n = rewards_shape[0];
  if (rewards_shape.size() != 1 || n > static_cast<hsize_t>(INT_MAX) ||
      static_cast<int>(n) != info.steps) {
    err.fail(info.name + ": rewards has shape " + shape_text(rewards_shape) + " but the episode " +
             "says " + std::to_string(info.steps) + " steps");
  }
  // Widths come from the 2-D datasets; each is checked against the others below.
  auto width = [&](const std::string& name, hsize_t rows) -> int {
    auto dims = shape_of(name);
    if (dims.size() != 2 || dims[0] != rows) {
      err.fail(info.name + ": '" + name + "' has shape " + shape_text(dims) + ", want (" +
               std::to_string(rows) + ", W)");
    }
    if (dims[1] > static_cast<hsize_t>(INT_MAX)) {
      err.fail(info.name + ": '" + name + "' is " + std::to_string(dims[1]) + " wide");
    }
    return static_cast<int>(dims[1]);
  };
  ep.obs_dim = width("observations", n + 1);
  ep.action_dim = width("actions", n);
  ep.num_blocks = width("plans", n);
  ep.world = width("metrics/peak_memory_bytes", n);
  const size_t N = n, B = ep.num_blocks;
  // Everything below is allocated from these shapes: charge it before any allocation.
  charge(info.name + " observations", N + 1, uint64_t(ep.obs_dim) * sizeof(float) + 1);
  charge(info.name + " actions and plans", N, uint64_t(ep.action_dim + B) * 4 + 1);
  charge(info.name + " per-rank and per-block metrics", N, (uint64_t(ep.world) + 3 * B) * 8 + 1);
  charge(info.name + " per-step columns", N, 8 * 8 + 4 + 1);
  auto doubles = [&](const std::string& name, size_t count) {
    std::vector<double> v(count);
    h5::read_all(err, gid, name, H5T_NATIVE_DOUBLE, v.data(), count);
    return v;
  };
  auto bytes = [&](const std::string& name) {
    std::vector<uint8_t> v(N);
    h5::read_all(err, gid, name, H5T_NATIVE_UINT8, v.data(), N);
    return v;
  };
  ep.observations.resize((N + 1) * ep.obs_dim);
  h5::read_all(err, gid, "observations", H5T_NATIVE_FLOAT, ep.observations.data(),
               ep.observations.size());
  ep.actions.resize(N * ep.action_dim);
  h5::read_all(err, gid, "actions", H5T_NATIVE_INT32, ep.actions.data(), ep.actions.size());
  ep.plans.resize(N * B);
  h5::read_all(err, gid, "plans", H5T_NATIVE_INT32, ep.plans.data(), ep.plans.size());
  ep.rewards = doubles("rewards", N);
  ep.terminations = bytes("terminations");
  ep.truncations = bytes("truncations");
  ep.step_latency_s = doubles("metrics/step_latency_s", N);
  ep.repartition_s = doubles("metrics/repartition_s", N);
  ep.repartition_bytes = doubles("metrics/repartition_bytes", N);
  ep.energy_j = doubles("metrics/energy_j", N);
  ep.tokens = doubles("metrics/tokens", N);
  ep.loss = doubles("metrics/loss", N);
  // Absent in traces written before it was recorded: NaN, "not measured".
  ep.repartition_peak_bytes =
      H5Lexists(gid, "metrics/repartition_peak_bytes", H5P_DEFAULT) > 0
          ? doubles("metrics/repartition_peak_bytes", N)
          : std::vector<double>(N, std::numeric_limits<double>::quiet_NaN());
  ep.ok = bytes("metrics/ok");
  ep.oom = bytes("metrics/oom");
  ep.peak_memory_bytes = doubles("metrics/peak_memory_bytes", N * ep.world);
  ep.block_fwd_s = doubles("metrics/block_fwd_s", N * B);
  ep.block_bwd_s = doubles("metrics/block_bwd_s", N * B);
  ep.block_comm_s = doubles("metrics/block_comm_s", N * B);
  auto source = [&](const std::string& name) {
    h5::H5Id d = h5::open_dataset(err, gid, name);
    return h5::read_attr_string(err, d.get(), "source");
  };
  ep.latency_source = source("metrics/step_latency_s");
  ep.memory_source = source("metrics/peak_memory_bytes");
  ep.energy_source = source("metrics/energy_j");

  if (H5Lexists(gid, "scalars", H5P_DEFAULT) > 0) {
    h5::H5Id sg(err.check_id(H5Gopen2(gid, "scalars", H5P_DEFAULT), "open scalars"));
    for (const std::string& name : h5::link_names(err, sg.get(), info.name + "/scalars")) {
      charge(info.name + "/scalars/" + name, N, 8 + 1);
      ep.scalars[name] = doubles("scalars/" + name, N);
    }
  }

  ep.initial = read_reset(gid, info.name);
  return ep;
}

}  // namespace shardgym
