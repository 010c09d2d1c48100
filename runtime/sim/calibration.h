// Compute efficiency of the simulated devices: which fraction of a device's dense peak a GEMM
// of a given shape reaches (docs/design.md §4, "Compute").
//
// Two limits, whichever is slower (a roofline): the peak scaled by an efficiency that depends
// on the GEMM's smallest dimension (small GEMMs under-fill the device), and the device memory
// bandwidth (bytes of A, B and C moved once). The efficiency table is built in, or read from a
// calibration file produced from live microbenchmarks. File format (CSV, one rule a line):
//
//   # comment lines and blank lines are ignored; an optional header line may name the columns
//   device,kind,min_gemm_dim,efficiency
//   H100-SXM5-80GB,*,0,0.20
//   H100-SXM5-80GB,*,1024,0.78
//   *,attention,128,0.45
//
// `device` is a DeviceType name or `*`, `kind` is `attention`, `mlp`, `head` (LM head) or `*`,
// `min_gemm_dim` ≥ 0, `efficiency` in (0, 1]. For a GEMM on device D in a block of kind K the
// rules of the most specific (device, kind) pair that has any are used (exact device before
// `*`, then exact kind before `*`), and among them the one with the largest min_gemm_dim not
// above the GEMM's smallest dimension (the smallest rule if none is).
#pragma once

#include <string>
#include <vector>

namespace shardgym {

struct CalibrationRule {
  std::string device = "*";
  std::string kind = "*";
  double min_gemm_dim = 0;
  double efficiency = 1;
};

class Calibration {
 public:
  Calibration() = default;
  Calibration(std::vector<CalibrationRule> rules, std::string source);

  // Throws std::invalid_argument if no rule applies to (device, kind).
  double efficiency(const std::string& device, const std::string& kind, double min_dim) const;
  const std::vector<CalibrationRule>& rules() const { return rules_; }
  const std::string& source() const { return source_; }  // "builtin" or the file path

 private:
  std::vector<CalibrationRule> rules_;
  std::string source_;
};

// The built-in table (any device, any kind), from typical cuBLAS GEMM efficiencies.
Calibration default_calibration();
// Parses the CSV text above; `where` names it in errors ("calib.csv:3: ...").
Calibration parse_calibration(const std::string& text, const std::string& where);
// Reads and parses a file; throws std::runtime_error if it cannot be read.
Calibration load_calibration(const std::string& path);

// One GEMM C[m,n] = A[m,k]·B[k,n], `count` times, in `kernels` launches (a batched GEMM:
// count > 1 in one kernel; chunked overlap: one kernel per chunk).
struct Gemm {
  double m = 0, k = 0, n = 0, count = 1, kernels = 1;
  double flops() const { return 2 * m * k * n * count; }
};

// Roofline time of the GEMMs on one device, `elem_bytes` per element; memory_bw ≤ 0 disables
// the bandwidth limit.
// - fixed_s = 0: Σ max(flops / (peak·eff(min dim)), bytes / memory_bw), eff from `calib`'s
//   table by the GEMM's smallest dimension.
// - fixed_s > 0 (a device whose GEMM fixed time is measured, hardware.yaml gemm_fixed_us):
//   Σ kernels·fixed_s + max(flops / peak, bytes / memory_bw), `peak_flops` already the rate a
//   large GEMM reaches. The fixed time (a kernel's launch, ramp-up and tail) is the shape
//   curve: a GEMM with a dimension of 128-256 takes about it alone (docs/design.md §4).
double gemm_time(const std::vector<Gemm>& gemms, double peak_flops, double memory_bw,
                 double elem_bytes, const Calibration& calib, const std::string& device,
                 const std::string& kind, double fixed_s = 0);

}  // namespace shardgym
