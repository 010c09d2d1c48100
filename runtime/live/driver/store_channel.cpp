#include "runtime/live/driver/store_channel.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace shardgym::live {

std::string command_key(int seq) { return "cmd/" + std::to_string(seq); }
std::string report_key(int seq, int rank) {
  return "rep/" + std::to_string(seq) + "/" + std::to_string(rank);
}
std::string failure_key(int n) { return "fail/" + std::to_string(n); }
std::string progress_key(int rank) { return "prog/" + std::to_string(rank); }

void store_mark_progress(c10d::Store& store, int rank, ProgressMark mark) {
  mark.ticket = store.add("prog_clock", 1);
  store_set_string(store, progress_key(rank), mark.serialize());
}

void store_start_gate(c10d::Store& store, int rank, int world_size, double limit_s) {
  store.add(kStartedKey, 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  for (;;) {
    const int64_t n = store.add(kStartedKey, 0);
    if (n >= world_size) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("rank " + std::to_string(rank) + ": only " + std::to_string(n) +
                               " of " + std::to_string(world_size) +
                               " rank processes started within " + std::to_string(int(limit_s)) +
                               " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string store_get_string(c10d::Store& store, const std::string& key) {
  const std::vector<uint8_t> v = store.get(key);
  return std::string(v.begin(), v.end());
}

void store_set_string(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

StoreChannel::StoreChannel(c10::intrusive_ptr<c10d::Store> store, int rank)
    : store_(std::move(store)), rank_(rank) {}

RankCommand StoreChannel::next(int last_seq) {
  const std::string key = command_key(last_seq + 1);
  store_mark_progress(*store_, rank_, ProgressMark::waiting(last_seq + 1));
  // Polling rather than a blocking wait: waiting has no "forever", and a rank may idle
  // between env steps for as long as the agent thinks.
  while (!store_->check({key})) std::this_thread::sleep_for(std::chrono::microseconds(500));
  RankCommand cmd = RankCommand::parse(store_get_string(*store_, key));
  store_mark_progress(*store_, rank_, ProgressMark::in_command(cmd.seq, op_name(cmd.op)));
  return cmd;
}

void StoreChannel::progress(const ProgressMark& mark) { store_mark_progress(*store_, rank_, mark); }

void StoreChannel::reply(const RankReport& report) {
  const std::string text = report.serialize();
  if (!report.ok) {
    const int64_t n = store_->add(kFailCountKey, 1);
    store_set_string(*store_, failure_key(static_cast<int>(n)), text);
  }
  store_set_string(*store_, report_key(report.seq, rank_), text);
}

}  // namespace shardgym::live
