// A prefetch of a cache line the caller is about to write.
//
// A producer filling a batch slot that the consumer's core held last waits,
// at its first store to each line, for that line to be taken from the other
// core. prefetchForWrite asks for the line in the exclusive state some time
// before: x86's PREFETCHW (read-for-ownership; PRFCHW, on every x86-64 CPU
// since Intel Broadwell and on AMD's since the first), and the compiler's
// write prefetch elsewhere (PRFM PSTL1KEEP on AArch64).
//
// A read prefetch (PREFETCHT0) does not do: it leaves the line shared, and
// the store still waits for ownership. Measured on the typed exchange's
// batches: PREFETCHW 12% faster than PREFETCHT0, which is no faster than no
// prefetch (docs/benchmarks.md, round twenty-five).
#pragma once

namespace sluice {

namespace internal {
// Whether this CPU has PREFETCHW; set during static initialization (false
// before it, and on CPUs that might fault on the instruction).
extern const bool kCpuHasPrefetchW;
}  // namespace internal

// Never faults, whatever the address.
inline void prefetchForWrite(const void* address) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (internal::kCpuHasPrefetchW)
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(address)));
#elif defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(address, 1);
#else
  (void)address;
#endif
}

}  // namespace sluice
