#include "runtime/core/training_run.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>

#include "runtime/core/experiment_spec.h"

namespace shardgym {

std::unique_ptr<TrainingRun> TrainingRun::clone() const {
  throw std::logic_error("the '" + backend() + "' training run cannot be cloned");
}

std::unique_ptr<TrainingRun> TrainingRun::clone_holding(const Plan&) const {
  throw std::logic_error("the '" + backend() + "' training run cannot be cloned");
}

std::vector<uint8_t> TrainingRun::action_mask(int block) const {
  std::vector<uint8_t> row(static_cast<size_t>(catalog().size()));
  action_mask_rows_into(block, 1, row.data());
  return row;
}

void TrainingRun::write_mask_rows(int first, int count, uint8_t* out,
                                  const std::function<std::vector<uint8_t>(int)>& row) const {
  const size_t k = static_cast<size_t>(catalog().size());
  for (int i = 0; i < count; ++i) {
    const std::vector<uint8_t> r = row(first + i);
    if (r.size() != k) {
      throw std::logic_error("the '" + backend() + "' run's mask row " +
                             std::to_string(first + i) + " has " + std::to_string(r.size()) +
                             " entries, the catalog " + std::to_string(k));
    }
    for (size_t e = 0; e < k; ++e) out[i * k + e] = r[e] != 0;
  }
}

bool TrainingRun::fits(const Plan& plan) const {
  const std::optional<Measurement> m = estimate(plan);
  return m && m->ok && !m->oom;
}

Plan fewest_fitting_stages(const TrainingRun& run, int min_stages, int max_stages,
                           const std::function<Plan(int)>& make) {
  const int world = run.cluster().world_size(), layers = run.model().layers;
  min_stages = std::max(1, min_stages);
  for (int p = min_stages; p <= max_stages && p <= layers; ++p) {
    if (world % p != 0 || (p != min_stages && layers % p != 0)) continue;
    Plan plan = make(p);
    if (plan.validate(run.model(), world).empty() && plan_fits(run, plan)) return plan;
  }
  return make(min_stages);
}

Plan resolve_baseline_plan(const std::string& text, const TrainingRun& run, int min_stages,
                           int max_stages) {
  if ((text != "megatron" && text != "megatron-sp") || max_stages <= 1)
    return resolve_plan(text, run.model(), run.cluster());
  const bool sp = text == "megatron-sp";
  return fewest_fitting_stages(run, min_stages, max_stages, [&](int p) {
    return megatron_plan(run.model(), run.cluster(), sp, p);
  });
}

namespace {
std::mutex g_late_mu;
std::vector<std::string>& late_failures() {
  static std::vector<std::string> v;
  return v;
}
}  // namespace

void note_late_failure(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_late_mu);
  if (late_failures().size() < 64) late_failures().push_back(what);  // the first ones say it
}

std::vector<std::string> take_late_failures() {
  std::lock_guard<std::mutex> lock(g_late_mu);
  std::vector<std::string> out;
  out.swap(late_failures());
  return out;
}

}  // namespace shardgym
