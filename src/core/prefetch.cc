#include <sluice/core/prefetch.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace sluice::internal {

namespace {

bool detectPrefetchW() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // CPUID leaf 0x80000001, ECX bit 8: PRFCHW (AMD's 3DNowPrefetch).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 8)) != 0;
#else
  return false;
#endif
}

}  // namespace

const bool kCpuHasPrefetchW = detectPrefetchW();

}  // namespace sluice::internal
