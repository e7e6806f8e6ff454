// SLUICE_ASSERT: invariants of Sluice's own code.
//
// An assertion states something that holds unless Sluice itself has a bug; it
// is never reachable from user input, a user function, a configuration value
// or a damaged file (those get a Status or an exception that names what was
// wrong). When one fails, the process logs the condition, the message (say
// which invariant broke) and the source location, then aborts: continuing
// would risk writing wrong state.
//
//   SLUICE_ASSERT(aligning_ >= 0, "a barrier completed alignment with none pending");
//
// SLUICE_ASSERT is checked in every build mode; keep it off per-record paths.
// SLUICE_DASSERT is checked only in debug builds (no NDEBUG) and may sit on
// the hot path.
#pragma once

namespace sluice::internal {
// Logs the failed assertion and aborts. Never returns.
[[noreturn]] void assertionFailed(const char* condition, const char* message, const char* file,
                                  int line);
}  // namespace sluice::internal

#define SLUICE_ASSERT(condition, message)                                             \
  do {                                                                                \
    if (!(condition)) [[unlikely]] {                                                  \
      ::sluice::internal::assertionFailed(#condition, (message), __FILE__, __LINE__); \
    }                                                                                 \
  } while (0)

#ifdef NDEBUG
#define SLUICE_DASSERT(condition, message) \
  do {                                     \
  } while (0)
#else
#define SLUICE_DASSERT(condition, message) SLUICE_ASSERT(condition, message)
#endif
