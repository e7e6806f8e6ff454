// SerialExecutor: one background thread that runs submitted work in order
// (the asynchronous part of snapshots, checkpoint completion).
//
// submit() may be called from any thread, also from work running on the
// executor. The destructor runs what is queued, then joins the thread. Work
// must not throw; what it throws is logged and dropped.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sluice {

class SerialExecutor {
 public:
  explicit SerialExecutor(std::string threadName);
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  void submit(std::function<void()> work);

 private:
  void loop();

  const std::string threadName_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sluice
