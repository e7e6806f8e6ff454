#include "core/text.h"

#include <fmt/format.h>

namespace sluice {

std::string escapeForMessage(std::string_view text, size_t maxLength) {
  std::string out;
  const size_t n = std::min(text.size(), maxLength);
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (n < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

}  // namespace sluice
