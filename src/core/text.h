// Text from outside (a checkpoint, a peer, a file) in an error message:
// printable ASCII as is, everything else escaped, long text cut, so that a
// damaged name never prints raw bytes to a terminal or a log.
#pragma once

#include <string>
#include <string_view>

namespace sluice {

// "abc\x00\xff" for the bytes a, b, c, 0, 255; at most `maxLength` input
// bytes, then "... (N bytes)".
std::string escapeForMessage(std::string_view text, size_t maxLength = 200);

}  // namespace sluice
