// prefetchForWrite: the CPU feature check against what the kernel reports,
// and a prefetch of memory the process may not touch, which must not fault.
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <sluice/core/prefetch.h>

namespace sluice {
namespace prefetch_test {
namespace {

#if defined(__x86_64__) && defined(__linux__)
TEST(PrefetchTest, DetectsPrefetchWAsTheKernelDoes) {
  // Linux lists CPUID 0x80000001 ECX bit 8 (PRFCHW) as "3dnowprefetch".
  std::ifstream cpuinfo("/proc/cpuinfo");
  ASSERT_TRUE(cpuinfo) << "cannot read /proc/cpuinfo";
  std::string line;
  bool sawFlags = false;
  bool kernelSays = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    sawFlags = true;
    std::istringstream words(line);
    std::string word;
    while (words >> word) kernelSays = kernelSays || word == "3dnowprefetch";
    break;
  }
  ASSERT_TRUE(sawFlags) << "no flags line in /proc/cpuinfo";
  EXPECT_EQ(internal::kCpuHasPrefetchW, kernelSays);
}
#endif

TEST(PrefetchTest, PrefetchOfAnInaccessiblePageDoesNotFault) {
  const long page = sysconf(_SC_PAGESIZE);
  ASSERT_GT(page, 0);
  void* p = mmap(nullptr, static_cast<size_t>(page), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  for (long offset = 0; offset < page; offset += 64)
    prefetchForWrite(static_cast<char*>(p) + offset);
  // Nor of memory no longer mapped.
  munmap(p, static_cast<size_t>(page));
  prefetchForWrite(p);
  SUCCEED();
}

}  // namespace
}  // namespace prefetch_test
}  // namespace sluice
