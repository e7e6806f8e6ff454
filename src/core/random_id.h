// Random identifiers: job ids (32 hex digits, as Flink's JobID prints) and
// the fresh names of stored files. Not cryptographic; unique enough that two
// processes never pick the same one in practice.
#pragma once

#include <string>

namespace sluice {

// 32 lower-case hex digits. Thread-safe.
std::string randomHexId();

}  // namespace sluice
