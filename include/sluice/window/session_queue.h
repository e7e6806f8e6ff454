// The schedule of the session window operator
// (internal/session_window_operator.h): which key has something due at
// which watermark, one min-heap for the whole operator instead of a timer
// per key and session.
//
// An entry (time, key number) promises only that nothing of that key is due
// before `time`; the operator checks what is really due when the entry comes
// up and pushes the key again for later if nothing is (a session that grew
// since its entry was pushed), or skips the entry if the key was scheduled
// anew in between (lazy invalidation: entries are never removed). So a
// session that grows with every element costs no heap operation per element,
// and one whose end moved past the watermark is pushed again once.
// Task thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::window {

class SessionQueue {
 public:
  struct Entry {
    int64_t time;
    uint32_t key;
  };

  void push(int64_t time, uint32_t key);
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // The earliest entry (ties: the lower key number); not empty().
  const Entry& top() const { return heap_.front(); }
  void pop();
  void clear() { heap_.clear(); }

 private:
  std::vector<Entry> heap_;
};

}  // namespace sluice::window
