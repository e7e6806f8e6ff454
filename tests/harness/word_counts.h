// The independent reference for WordCount tests: every word's count in a
// text, as the example tokenizes (lower-cased runs of letters and digits).
#pragma once

#include <cctype>
#include <cstdint>
#include <map>
#include <string>

namespace sluice::test {

inline std::map<std::string, int64_t> referenceWordCounts(const std::string& text) {
  std::map<std::string, int64_t> counts;
  std::string word;
  for (char ch : text + "\n") {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      word.push_back(static_cast<char>(std::tolower(c)));
    } else if (!word.empty()) {
      ++counts[word];
      word.clear();
    }
  }
  return counts;
}

}  // namespace sluice::test
