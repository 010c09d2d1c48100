#include "runtime/core/training_run.h"

#include <stdexcept>

namespace shardgym {

std::unique_ptr<TrainingRun> TrainingRun::clone() const {
  throw std::logic_error("the '" + backend() + "' training run cannot be cloned");
}

}  // namespace shardgym
