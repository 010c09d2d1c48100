#include "agents/return_scale.h"

#include <cmath>

namespace shardgym {

double ReturnScale::scale(int i, double reward, double gamma, bool done) {
  if (ret.size() <= static_cast<size_t>(i)) ret.resize(static_cast<size_t>(i) + 1, 0.0);
  ret[i] = ret[i] * gamma + reward;
  // RunningMeanStd's update with a batch of one value (Chan et al.'s parallel variance).
  const double delta = ret[i] - mean, total = count + 1;
  mean += delta / total;
  var = (var * count + delta * delta * count / total) / total;
  count = total;
  if (done) ret[i] = 0;
  return reward / std::sqrt(var + 1e-8);
}

}  // namespace shardgym
