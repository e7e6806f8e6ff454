#include <algorithm>

#include <sluice/window/session_queue.h>

namespace sluice::window {

namespace {
// std::push_heap builds a max-heap: "less" is "later".
bool later(const SessionQueue::Entry& a, const SessionQueue::Entry& b) {
  return a.time != b.time ? a.time > b.time : a.key > b.key;
}
}  // namespace

void SessionQueue::push(int64_t time, uint32_t key) {
  heap_.push_back(Entry{time, key});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

void SessionQueue::pop() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  heap_.pop_back();
}

}  // namespace sluice::window
