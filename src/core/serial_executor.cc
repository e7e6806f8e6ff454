#include "core/serial_executor.h"

#include <exception>

#include "core/logging.h"

namespace sluice {

SerialExecutor::SerialExecutor(std::string threadName)
    : threadName_(std::move(threadName)), thread_([this] { loop(); }) {}

SerialExecutor::~SerialExecutor() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SerialExecutor::submit(std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
}

void SerialExecutor::loop() {
  log::setThreadName(threadName_);
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      work();
    } catch (const std::exception& e) {
      log::error("{}: work failed: {}", threadName_, e.what());
    } catch (...) {
      log::error("{}: work failed with an unknown exception", threadName_);
    }
  }
}

}  // namespace sluice
