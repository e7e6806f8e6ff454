#include "core/random_id.h"

#include <chrono>
#include <random>

#include <fmt/format.h>

namespace sluice {

std::string randomHexId() {
  thread_local std::mt19937_64 gen = [] {
    std::random_device rd;
    return std::mt19937_64(
        (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  }();
  const uint64_t hi = gen();
  const uint64_t lo = gen();
  return fmt::format("{:016x}{:016x}", hi, lo);
}

}  // namespace sluice
