// docs/configuration.md is the user's reference for every option: each
// registered option must appear in its table with its key, default and the
// registry's description, so the page cannot drift from the code.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <sluice/core/config_options.h>

namespace sluice {
namespace config_docs_test {
namespace {

std::string readDocs() {
  std::ifstream f(std::string(SLUICE_TEST_DATA_DIR) + "/../../docs/configuration.md");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ConfigDocsTest, EveryRegisteredOptionIsDocumentedWithItsDefaultAndDescription) {
  const std::string docs = readDocs();
  ASSERT_FALSE(docs.empty()) << "docs/configuration.md is missing";
  for (const auto& o : registeredOptions()) {
    std::string row = "| `" + std::string(o.key) + "` |";
    size_t at = docs.find(row);
    ASSERT_NE(at, std::string::npos) << o.key << " has no row in docs/configuration.md";
    std::string line = docs.substr(at, docs.find('\n', at) - at);
    if (o.defaultValue.empty()) {
      EXPECT_NE(line.find("*(empty)*"), std::string::npos) << line;
    } else {
      EXPECT_NE(line.find("`" + o.defaultValue + "`"), std::string::npos)
          << o.key << ": the default '" << o.defaultValue << "' is not in its row: " << line;
    }
    EXPECT_NE(line.find(std::string(o.description)), std::string::npos)
        << o.key << ": the row does not carry the registry's description: " << line;
  }
}

}  // namespace
}  // namespace config_docs_test
}  // namespace sluice
