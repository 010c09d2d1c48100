#include "runtime/live/driver/meters.h"

#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>
#include <c10/core/alignment.h>
#include <c10/core/impl/alloc_cpu.h>

namespace shardgym::live {

double wall_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_now_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

namespace {

struct RankCounter {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
};

// Slot kMaxRanks holds the unattributed allocations.
RankCounter g_counters[MemoryMeter::kMaxRanks + 1];
thread_local int t_rank = MemoryMeter::kUnattributed;
std::atomic<bool> g_installed{false};

RankCounter& slot(int rank) {
  return g_counters[(rank >= 0 && rank < MemoryMeter::kMaxRanks) ? rank : MemoryMeter::kMaxRanks];
}

// Every block carries a header of one alignment unit in front of the data, so that the data
// pointer is the context (raw_allocate works) and the free knows its rank and size.
struct Header {
  int64_t bytes;
  int32_t rank;
};
constexpr size_t kHeader = c10::gAlignment;
static_assert(sizeof(Header) <= kHeader, "header must fit in one alignment unit");

void counting_free(void* data) {
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kHeader;
  const Header* h = reinterpret_cast<const Header*>(base);
  slot(h->rank).current.fetch_sub(h->bytes, std::memory_order_relaxed);
  c10::free_cpu(base);
}

// LibTorch 2.3 made allocate() non-const and added copy_data().
#define SHARDGYM_TORCH_2_3 (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3))
#if SHARDGYM_TORCH_2_3
#define SHARDGYM_ALLOCATE_CONST
#else
#define SHARDGYM_ALLOCATE_CONST const
#endif

class CountingAllocator final : public c10::Allocator {
 public:
#if SHARDGYM_TORCH_2_3
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif
  c10::DataPtr allocate(size_t n) SHARDGYM_ALLOCATE_CONST override {
    if (n == 0) return {nullptr, nullptr, &counting_free, c10::Device(c10::DeviceType::CPU)};
    char* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    Header* h = reinterpret_cast<Header*>(base);
    h->bytes = static_cast<int64_t>(n);
    h->rank = t_rank;
    RankCounter& c = slot(t_rank);
    const int64_t now = c.current.fetch_add(h->bytes, std::memory_order_relaxed) + h->bytes;
    int64_t peak = c.peak.load(std::memory_order_relaxed);
    while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    void* data = base + kHeader;
    return {data, data, &counting_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counting_free; }
};

void check_rank(int rank, const char* what) {
  if (rank < 0 || rank >= MemoryMeter::kMaxRanks) {
    throw std::invalid_argument(std::string("MemoryMeter::") + what + ": rank " +
                                std::to_string(rank) + " outside [0, " +
                                std::to_string(MemoryMeter::kMaxRanks) + ")");
  }
}

}  // namespace

void MemoryMeter::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    // c10 takes ownership; the allocator lives as long as the process.
    c10::SetCPUAllocator(new CountingAllocator(), /*priority=*/100);
    g_installed = true;
  });
}

bool MemoryMeter::installed() { return g_installed; }

MemoryMeter::Scope::Scope(int rank) : previous_(t_rank) {
  check_rank(rank, "Scope");
  t_rank = rank;
}

MemoryMeter::Scope::~Scope() { t_rank = previous_; }

int MemoryMeter::current_rank() { return t_rank; }

int64_t MemoryMeter::current_bytes(int rank) {
  check_rank(rank, "current_bytes");
  return slot(rank).current.load();
}

int64_t MemoryMeter::peak_bytes(int rank) {
  check_rank(rank, "peak_bytes");
  return slot(rank).peak.load();
}

void MemoryMeter::reset_peak(int rank) {
  check_rank(rank, "reset_peak");
  slot(rank).peak.store(slot(rank).current.load());
}

namespace {
std::mutex g_lease_mu;
bool g_leased[MemoryMeter::kMaxRanks] = {};
}  // namespace

MemoryMeter::Lease::Lease(int n) : n_(n) {
  if (n < 1 || n > kMaxRanks)
    throw std::invalid_argument("MemoryMeter::Lease: " + std::to_string(n) + " slots outside [1, " +
                                std::to_string(kMaxRanks) + "]");
  std::lock_guard<std::mutex> lock(g_lease_mu);
  for (int b = 0; b + n <= kMaxRanks; ++b) {
    if (std::none_of(g_leased + b, g_leased + b + n, [](bool x) { return x; })) {
      std::fill(g_leased + b, g_leased + b + n, true);
      base_ = b;
      return;
    }
  }
  throw std::runtime_error("the memory meter has no " + std::to_string(n) +
                           " free slots in a row for this run's rank threads (" +
                           std::to_string(kMaxRanks) +
                           " in all, held by the other live runs of this process)");
}

MemoryMeter::Lease::~Lease() {
  std::lock_guard<std::mutex> lock(g_lease_mu);
  std::fill(g_leased + base_, g_leased + base_ + n_, false);
}

// ---- energy ----

EnergyMeter::EnergyMeter(PowerModel model, std::string rapl_dir) : model_(model) {
  // Top-level package zones only ("intel-rapl:0", not "intel-rapl:0:0"): subzones are
  // contained in their package and would count twice.
  DIR* d = opendir(rapl_dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.rfind("intel-rapl:", 0) == 0 && n.find(':', 11) == std::string::npos) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    Zone z;
    z.energy_path = rapl_dir + "/" + n + "/energy_uj";
    std::ifstream range(rapl_dir + "/" + n + "/max_energy_range_uj");
    if (!(range >> z.max_uj)) z.max_uj = 0;
    double probe = 0;
    if (!read_uj(z, &probe)) {  // unreadable (root-only): fall back to the model altogether
      zones_.clear();
      return;
    }
    zones_.push_back(z);
  }
  if (!zones_.empty()) source_ = "rapl";
}

bool EnergyMeter::read_uj(const Zone& z, double* uj) const {
  std::ifstream in(z.energy_path);
  return static_cast<bool>(in >> *uj);
}

void EnergyMeter::start() {
  for (auto& z : zones_) {
    if (!read_uj(z, &z.start_uj)) z.start_uj = 0;
  }
}

double EnergyMeter::stop(double wall_s, const std::vector<double>& busy_s) {
  if (zones_.empty()) return model_energy(model_, wall_s, busy_s);
  double joules = 0;
  for (const auto& z : zones_) {
    double now = 0;
    if (!read_uj(z, &now)) continue;
    double delta = now - z.start_uj;
    if (delta < 0) delta += z.max_uj;  // the counter wrapped
    joules += delta * 1e-6;
  }
  return joules;
}

double EnergyMeter::model_energy(const PowerModel& m, double wall_s,
                                 const std::vector<double>& busy_s) {
  double j = 0;
  for (double b : busy_s) j += m.idle_w * wall_s + (m.busy_w - m.idle_w) * std::min(b, wall_s);
  return j;
}

}  // namespace shardgym::live
