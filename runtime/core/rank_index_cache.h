// RankIndexCache: ClusterSpec::node_of()'s index of the first rank of every `nodes` entry
// (runtime/core/cluster_spec.h), kept apart from the spec's data.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace shardgym {

// The first rank of every `nodes` entry, built at the first rank lookup, so that node_of()
// is O(log nodes) rather than O(nodes): callers look up every rank, and at the largest world
// the config limits allow (ClusterSpec::kMaxGpus ranks on kMaxNodes nodes) a linear scan made
// `cost` take minutes (docs/robustness.md, "Accepted configs finish"). A copy starts empty;
// the index is rebuilt when the number of entries changed or a lookup does not fit (the
// entries are meant to be edited only before ranks are looked up). Safe to share between
// threads: an index is replaced, never changed.
class RankIndexCache {
 public:
  RankIndexCache() = default;
  RankIndexCache(const RankIndexCache&) {}
  RankIndexCache& operator=(const RankIndexCache&) {
    current_.store(nullptr, std::memory_order_release);
    return *this;
  }
  // first[i] = ranks before entry i; first.back() = the world size. Null: not built yet.
  const std::vector<long long>* get() const { return current_.load(std::memory_order_acquire); }
  // Keeps every index it was given until it is destroyed, so a pointer from get() stays
  // valid while another thread replaces it.
  const std::vector<long long>* set(std::vector<long long> first) const {
    std::lock_guard<std::mutex> lock(mutex_);
    owned_.push_back(std::make_unique<const std::vector<long long>>(std::move(first)));
    current_.store(owned_.back().get(), std::memory_order_release);
    return owned_.back().get();
  }

 private:
  mutable std::atomic<const std::vector<long long>*> current_{nullptr};
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<const std::vector<long long>>> owned_;
};

}  // namespace shardgym
