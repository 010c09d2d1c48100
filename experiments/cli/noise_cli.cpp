// The live commands' noise check on the command line (experiments/noise_gate.h).
#include "experiments/cli/commands.h"

namespace shardgym::cli {

NoiseLimits noise_limits(const NoiseArgs& args) {
  NoiseLimits l;
  if (args.noise_limit) {
    l.refuse = *args.noise_limit;
    l.warn = *args.noise_limit / 2;
  }
  l.allow_noisy = args.allow_noisy;
  return l;
}

int report_noise(const NoiseReport& report, bool json, std::ostream& out, std::ostream& err) {
  if (!json) out << noise_line(report);
  err << noise_warning(report);
  return report.refused() ? kExitTooNoisy : 0;
}

std::string json_with_noise(const std::string& object, const NoiseReport& report) {
  const size_t close = object.rfind('}');
  if (close == std::string::npos) return object;
  const size_t open = object.find('{');
  const bool empty = object.find_first_not_of(" \n\t", open + 1) == close;
  return object.substr(0, close) + (empty ? "" : ", ") + "\"noise\": " + noise_json(report) +
         object.substr(close);
}

}  // namespace shardgym::cli
