#include "env/pipeline_action.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace shardgym {

int pipeline_choices(int stages) { return stages > 1 ? 2 * stages - 1 : 0; }

Pipeline apply_pipeline_choice(const Pipeline& pipe, int choice, int layers) {
  const int n = pipeline_choices(pipe.stages);
  if (choice == 0) return pipe;
  if (choice < 0 || choice >= n)
    throw std::out_of_range("pipeline choice " + std::to_string(choice) + " outside [0, " +
                            std::to_string(std::max(1, n)) + ")");
  const int boundary = (choice - 1) / 2;
  return pipe.moved(boundary, choice % 2 == 1 ? -1 : +1, layers);
}

int pipeline_choice_toward(const Pipeline& from, const Pipeline& to, int layers) {
  Pipeline same_split = to;
  same_split.split = from.split;
  if (from.stages < 2 || !(same_split == from)) return 0;
  const std::vector<int> a = from.layers_per_stage(layers), b = to.layers_per_stage(layers);
  if (a.size() != b.size()) return 0;
  // First layer of stage i+1: the prefix sums. Move the first boundary that differs.
  int ea = 0, eb = 0;
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    ea += a[i], eb += b[i];
    if (ea > eb) return 1 + 2 * static_cast<int>(i);
    if (ea < eb) return 2 + 2 * static_cast<int>(i);
  }
  return 0;
}

}  // namespace shardgym
