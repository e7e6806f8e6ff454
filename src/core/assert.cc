#include <cstdlib>

#include <sluice/core/assert.h>

#include "core/logging.h"

namespace sluice::internal {

void assertionFailed(const char* condition, const char* message, const char* file, int line) {
  // Straight to the sink: the level filter must not hide a crash's cause.
  log::detail::write(log::Level::kError,
                     fmt::format("assertion failed at {}:{}: {} ({}); this is a bug in Sluice",
                                 file, line, message, condition));
  std::abort();
}

}  // namespace sluice::internal
