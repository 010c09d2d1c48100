#include "runtime/sim/calibration.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "runtime/core/text.h"

namespace shardgym {
namespace {

double parse_number(const std::string& text, const std::string& where, const char* column) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::invalid_argument(where + ": " + column + " '" + text + "' is not a number");
  return v;
}

}  // namespace

Calibration::Calibration(std::vector<CalibrationRule> rules, std::string source)
    : rules_(std::move(rules)), source_(std::move(source)) {
  // Sorted by threshold so that a lookup can stop at the first rule above the GEMM.
  std::stable_sort(rules_.begin(), rules_.end(), [](const auto& a, const auto& b) {
    return a.min_gemm_dim < b.min_gemm_dim;
  });
}

double Calibration::efficiency(const std::string& device, const std::string& kind,
                               double min_dim) const {
  // Most specific (device, kind) pair with any rule: (D,K), (D,*), (*,K), (*,*).
  const std::string devs[2] = {device, "*"};
  const std::string kinds[2] = {kind, "*"};
  for (const auto& d : devs) {
    for (const auto& k : kinds) {
      const CalibrationRule* best = nullptr;
      const CalibrationRule* smallest = nullptr;
      for (const auto& r : rules_) {
        if (r.device != d || r.kind != k) continue;
        if (!smallest) smallest = &r;
        if (r.min_gemm_dim <= min_dim) best = &r;
      }
      if (best) return best->efficiency;
      if (smallest) return smallest->efficiency;
    }
  }
  throw std::invalid_argument("calibration '" + source_ + "' has no rule for device '" + device +
                              "' and block kind '" + kind + "' (add a '*' rule)");
}

Calibration default_calibration() {
  // Fraction of dense peak reached by a GEMM whose smallest dimension is at least the
  // threshold: small dimensions leave tensor cores and SMs idle (wave quantisation, tiles).
  const double table[][2] = {{0, 0.10},    {16, 0.20},   {64, 0.35},   {128, 0.50},
                             {256, 0.60},  {512, 0.68},  {1024, 0.74}, {2048, 0.78},
                             {4096, 0.80}};
  std::vector<CalibrationRule> rules;
  for (const auto& row : table) rules.push_back({"*", "*", row[0], row[1]});
  return Calibration(std::move(rules), "builtin");
}

Calibration parse_calibration(const std::string& text, const std::string& where) {
  std::vector<CalibrationRule> rules;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string at = where + ":" + std::to_string(line_no);
    const std::string body = trim(line);
    if (body.empty() || body[0] == '#') continue;
    std::vector<std::string> cols;
    std::stringstream ss(body);
    std::string col;
    while (std::getline(ss, col, ',')) cols.push_back(trim(col));
    if (!body.empty() && body.back() == ',') cols.push_back("");
    if (cols.size() != 4)
      throw std::invalid_argument(at + ": expected 4 columns device,kind,min_gemm_dim,efficiency"
                                  " but found " + std::to_string(cols.size()));
    if (cols[0] == "device" && cols[1] == "kind") continue;  // header line
    CalibrationRule r;
    r.device = cols[0];
    r.kind = cols[1];
    if (r.device.empty()) throw std::invalid_argument(at + ": empty device (use '*' for any)");
    if (r.kind != "*" && r.kind != "attention" && r.kind != "mlp" && r.kind != "head")
      throw std::invalid_argument(at + ": kind '" + r.kind +
                                  "' is not one of attention, mlp, head, *");
    r.min_gemm_dim = parse_number(cols[2], at, "min_gemm_dim");
    r.efficiency = parse_number(cols[3], at, "efficiency");
    if (r.min_gemm_dim < 0) throw std::invalid_argument(at + ": min_gemm_dim must be >= 0");
    if (!(r.efficiency > 0 && r.efficiency <= 1))
      throw std::invalid_argument(at + ": efficiency " + cols[3] + " is outside (0, 1]");
    rules.push_back(r);
  }
  if (rules.empty()) throw std::invalid_argument(where + ": no calibration rules");
  return Calibration(std::move(rules), where);
}

Calibration load_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read calibration file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_calibration(ss.str(), path);
}

double gemm_time(const std::vector<Gemm>& gemms, double peak_flops, double memory_bw,
                 double elem_bytes, const Calibration& calib, const std::string& device,
                 const std::string& kind, double fixed_s) {
  double t = 0;
  for (const auto& g : gemms) {
    if (g.count <= 0 || g.m <= 0 || g.k <= 0 || g.n <= 0) continue;
    const double min_dim = std::min({g.m, g.k, g.n});
    const double eff = fixed_s > 0 ? 1.0 : calib.efficiency(device, kind, min_dim);
    const double compute = g.flops() / (peak_flops * eff);
    const double bytes = elem_bytes * (g.m * g.k + g.k * g.n + g.m * g.n) * g.count;
    const double memory = memory_bw > 0 ? bytes / memory_bw : 0;
    t += std::max(compute, memory) + (fixed_s > 0 ? fixed_s * g.kernels : 0.0);
  }
  return t;
}

}  // namespace shardgym
