#include "core/input_wakeups.h"

namespace onceflow {

uint64_t InputWakeups::commits(const std::vector<Input>& inputs) const {
  uint64_t n = 0;
  for (const Input& input : inputs) {
    auto it = commits_.find(input);
    if (it != commits_.end()) n += it->second;
  }
  return n;
}

bool InputWakeups::wait(Runtime& runtime, const std::vector<Input>& inputs, Micros t, uint64_t seen) {
  if (commits(inputs) != seen) return true;
  const Waiting me{runtime.waiter()};
  for (const Input& input : inputs) waiting_.emplace(input, me);
  const bool woken = runtime.sleep_until_woken(t);
  // What a wake left behind. (A fiber killed while it waits leaves its entries: a wake for
  // them is ignored, and they go with the process.)
  for (const Input& input : inputs) {
    auto [from, to] = waiting_.equal_range(input);
    for (auto it = from; it != to;) it = it->second == me ? waiting_.erase(it) : std::next(it);
  }
  return woken;
}

void InputWakeups::committed(Runtime& runtime, const std::vector<Input>& written) {
  for (const Input& input : written) {
    ++commits_[input];
    auto [from, to] = waiting_.equal_range(input);
    for (auto it = from; it != to; ++it) runtime.wake(it->second.waiter);
    waiting_.erase(from, to);
  }
}

}  // namespace onceflow
