// waitUntil: for a test that must see another thread get somewhere (a job
// reach a state, a file appear). It returns as soon as the condition holds;
// the timeout only bounds how long a broken run hangs, so a slow machine
// cannot turn it into a pass. Never wait for a fixed time instead.
#pragma once

#include <chrono>
#include <thread>

namespace sluice::test {

// Polls `condition` until it returns true or `timeout` passes; returns its
// last answer.
template <class Condition>
bool waitUntil(Condition condition,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return condition();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace sluice::test
