// Meters of the live run: clocks, memory per rank, energy (docs/design.md §4, §7 CPU row).
//
// Memory: a counting CPU allocator, installed once per process in front of c10's, attributes
// every allocation to the rank of the allocating thread (MemoryMeter::Scope) and frees to the
// rank that allocated, so rank threads sharing one process get separate current/peak figures
// (source "allocator"). Only tensor storage is counted — what the analytic estimate counts.
// The counters are slots of the process: the rank threads of one live run lease a block of
// them (MemoryMeter::Lease), so two live runs alive in one process (an env and its Megatron-LM
// reference, say) never count each other's tensors; rank processes use slot = rank.
//
// Energy: RAPL package counters (/sys/class/powercap/intel-rapl:N/energy_uj) when readable,
// source "rapl"; otherwise the power model P_idle·T + (P_busy − P_idle)·busy per rank, with
// busy = measured thread CPU time, source "model". RAPL is root-only and absent in most VMs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace shardgym::live {

// Wall clock and the calling thread's CPU time, in seconds.
double wall_now_s();
double thread_cpu_now_s();

class Stopwatch {
 public:
  Stopwatch() : t0_(std::chrono::steady_clock::now()) {}
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  void restart() { t0_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point t0_;
};

class MemoryMeter {
 public:
  static constexpr int kMaxRanks = 256;
  static constexpr int kUnattributed = -1;  // threads outside any Scope

  // Installs the counting allocator (idempotent, thread-safe). Tensors allocated before stay
  // with the previous allocator and are never counted.
  static void install();
  static bool installed();

  // While alive, allocations by this thread count for `rank`. Nests (restores the previous).
  class Scope {
   public:
    explicit Scope(int rank);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    int previous_;
  };
  static int current_rank();  // of this thread, kUnattributed outside a Scope

  static int64_t current_bytes(int rank);
  static int64_t peak_bytes(int rank);
  static void reset_peak(int rank);  // peak := current

  // `n` consecutive slots no other lease holds, for one run's rank threads (rank r counts in
  // slot base() + r); released when the lease ends. Throws std::runtime_error where fewer
  // than n of the kMaxRanks slots are free together.
  class Lease {
   public:
    explicit Lease(int n);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    int base() const { return base_; }

   private:
    int base_ = 0, n_ = 0;
  };
};

struct PowerModel {
  double idle_w = 0;  // per rank while the run exists
  double busy_w = 0;  // per rank while it computes
};

class EnergyMeter {
 public:
  // `rapl_dir` is where powercap zones are looked for (tests point it elsewhere).
  explicit EnergyMeter(PowerModel model, std::string rapl_dir = "/sys/class/powercap");
  const std::string& source() const { return source_; }  // "rapl" | "model"

  void start();
  // Joules since start(): RAPL's difference (wrap-around handled), or the model applied to
  // `wall_s` and each rank's `busy_s`.
  double stop(double wall_s, const std::vector<double>& busy_s);

  // The model alone, for callers that have no meter running.
  static double model_energy(const PowerModel& m, double wall_s, const std::vector<double>& busy_s);

 private:
  struct Zone {
    std::string energy_path;
    double max_uj = 0;
    double start_uj = 0;
  };
  bool read_uj(const Zone& z, double* uj) const;

  PowerModel model_;
  std::vector<Zone> zones_;
  std::string source_ = "model";
};

}  // namespace shardgym::live
