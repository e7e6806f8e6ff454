#include <string>

#include <sluice/core/key_hash.h>

namespace sluice {

int32_t javaStringHashCode(std::string_view utf8) {
  // Java int arithmetic in uint32_t: wraps instead of overflowing.
  uint32_t h = 0;
  auto add = [&h](uint32_t codeUnit) { h = 31 * h + codeUnit; };
  const auto* p = reinterpret_cast<const unsigned char*>(utf8.data());
  const size_t n = utf8.size();
  size_t i = 0;
  while (i < n) {
    const unsigned lead = p[i];
    if (lead < 0x80) {
      add(lead);
      ++i;
      continue;
    }
    // The lead byte fixes how many continuation bytes follow and narrows the
    // range of the first one (Unicode table 3-7), which excludes overlong
    // forms and code points above U+10FFFF. Unlike that table, Java accepts
    // ED A0..BF as the start of a sequence and replaces the whole encoded
    // surrogate with one U+FFFD once it is complete.
    size_t continuations;
    unsigned lo = 0x80;
    unsigned hi = 0xBF;
    uint32_t cp;
    if (lead >= 0xC2 && lead <= 0xDF) {
      continuations = 1;
      cp = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      continuations = 2;
      cp = lead & 0x0F;
      if (lead == 0xE0) lo = 0xA0;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      continuations = 3;
      cp = lead & 0x07;
      if (lead == 0xF0) lo = 0x90;
      if (lead == 0xF4) hi = 0x8F;
    } else {
      add(0xFFFD);  // a byte that cannot start a sequence
      ++i;
      continue;
    }
    size_t j = i + 1;
    bool complete = true;
    for (size_t k = 0; k < continuations; ++k, ++j) {
      if (j == n || p[j] < lo || p[j] > hi) {
        complete = false;
        break;
      }
      cp = (cp << 6) | (p[j] & 0x3F);
      lo = 0x80;
      hi = 0xBF;
    }
    i = j;
    if (!complete || (cp >= 0xD800 && cp <= 0xDFFF)) {
      // Java replaces the longest valid prefix (the "maximal subpart") with
      // one U+FFFD and resumes at the byte that broke it.
      add(0xFFFD);
    } else if (cp >= 0x10000) {
      cp -= 0x10000;
      add(0xD800 + (cp >> 10));
      add(0xDC00 + (cp & 0x3FF));
    } else {
      add(cp);
    }
  }
  return static_cast<int32_t>(h);
}

namespace internal {

void throwInvalidMaxParallelism(int32_t maxParallelism) {
  throw SluiceException("maxParallelism must be in [1, " +
                        std::to_string(kUpperBoundMaxParallelism) + "], got " +
                        std::to_string(maxParallelism));
}

void throwInvalidParallelism(int32_t maxParallelism, int32_t parallelism) {
  throw SluiceException("parallelism must be in [1, maxParallelism=" +
                        std::to_string(maxParallelism) + "], got " + std::to_string(parallelism));
}

void throwInvalidKeyGroup(int32_t maxParallelism, int32_t keyGroup) {
  throw SluiceException("key group must be in [0, " + std::to_string(maxParallelism) + "), got " +
                        std::to_string(keyGroup));
}

void throwInvalidOperatorIndex(int32_t parallelism, int32_t operatorIndex) {
  throw SluiceException("operator index must be in [0, " + std::to_string(parallelism) + "), got " +
                        std::to_string(operatorIndex));
}

}  // namespace internal

KeyGroupRange computeKeyGroupRangeForOperatorIndex(int32_t maxParallelism, int32_t parallelism,
                                                   int32_t operatorIndex) {
  checkParallelism(maxParallelism, parallelism);
  if (operatorIndex < 0 || operatorIndex >= parallelism) {
    internal::throwInvalidOperatorIndex(parallelism, operatorIndex);
  }
  // The smallest and largest keyGroup with
  // keyGroup * parallelism / maxParallelism == operatorIndex. Products stay
  // below 2^30.
  const int32_t start = (operatorIndex * maxParallelism + parallelism - 1) / parallelism;
  const int32_t end = ((operatorIndex + 1) * maxParallelism - 1) / parallelism;
  return KeyGroupRange{start, end};
}

int32_t computeDefaultMaxParallelism(int32_t parallelism) {
  if (parallelism < 1 || parallelism > kUpperBoundMaxParallelism) {
    internal::throwInvalidParallelism(kUpperBoundMaxParallelism, parallelism);
  }
  int32_t target = parallelism + parallelism / 2;
  int32_t pow2 = 1;
  while (pow2 < target) pow2 <<= 1;  // target < 2^16, so no overflow
  if (pow2 < kDefaultMaxParallelism) return kDefaultMaxParallelism;
  if (pow2 > kUpperBoundMaxParallelism) return kUpperBoundMaxParallelism;
  return pow2;
}

}  // namespace sluice
