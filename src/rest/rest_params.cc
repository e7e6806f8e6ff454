#include "rest/rest_params.h"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "core/text.h"

namespace sluice::rest {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool isHexId(std::string_view text) {
  if (text.size() != 32) return false;
  for (char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::vector<std::string> splitCommaList(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = trim(text.substr(start, end - start));
    if (!item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

Result<int64_t> parseInteger(std::string_view text, std::string_view what, int64_t min,
                             int64_t max) {
  const std::string_view t = trim(text);
  int64_t value = 0;
  const char* end = t.data() + t.size();
  auto [ptr, ec] = std::from_chars(t.data(), end, value);
  if (t.empty() || ec != std::errc() || ptr != end) {
    return Status::invalidArgument(
        fmt::format("{}: expected an integer, got '{}'", what, escapeForMessage(text)));
  }
  if (value < min || value > max) {
    return Status::invalidArgument(
        fmt::format("{}: {} is out of range [{}, {}]", what, value, min, max));
  }
  return value;
}

Result<bool> parseBoolean(std::string_view text, std::string_view what) {
  const std::string t = lower(trim(text));
  if (t == "true") return true;
  if (t == "false") return false;
  return Status::invalidArgument(
      fmt::format("{}: expected true or false, got '{}'", what, escapeForMessage(text)));
}

bool SubtaskSelection::contains(int subtask) const {
  if (ranges.empty()) return true;
  for (const auto& [lo, hi] : ranges) {
    if (subtask >= lo && subtask <= hi) return true;
  }
  return false;
}

Result<SubtaskSelection> parseSubtaskSelection(std::string_view text) {
  constexpr std::string_view kWhat = "query parameter 'subtasks'";
  constexpr int64_t kMax = 1 << 20;
  SubtaskSelection sel;
  for (const std::string& item : splitCommaList(text)) {
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      auto v = parseInteger(item, kWhat, 0, kMax);
      if (!v.isOk()) return v.status();
      sel.ranges.emplace_back(static_cast<int>(v.value()), static_cast<int>(v.value()));
      continue;
    }
    auto lo = parseInteger(std::string_view(item).substr(0, dash), kWhat, 0, kMax);
    auto hi = parseInteger(std::string_view(item).substr(dash + 1), kWhat, 0, kMax);
    if (!lo.isOk() || !hi.isOk()) {
      return Status::invalidArgument(
          fmt::format("{}: expected a subtask index or a range like 2-5, got '{}'", kWhat,
                      escapeForMessage(item)));
    }
    if (lo.value() > hi.value()) {
      return Status::invalidArgument(
          fmt::format("{}: range '{}' ends before it starts", kWhat, escapeForMessage(item)));
    }
    sel.ranges.emplace_back(static_cast<int>(lo.value()), static_cast<int>(hi.value()));
  }
  if (sel.ranges.empty() && !trim(text).empty()) {
    return Status::invalidArgument(
        fmt::format("{}: no subtask in '{}'", kWhat, escapeForMessage(text)));
  }
  return sel;
}

Result<Aggregations> parseAggregations(std::string_view text) {
  const std::vector<std::string> items = splitCommaList(text);
  if (items.empty()) return Aggregations{};
  Aggregations a{false, false, false, false};
  for (const std::string& item : items) {
    const std::string l = lower(item);
    if (l == "min") {
      a.min = true;
    } else if (l == "max") {
      a.max = true;
    } else if (l == "avg") {
      a.avg = true;
    } else if (l == "sum") {
      a.sum = true;
    } else {
      return Status::invalidArgument(
          fmt::format("query parameter 'agg': unknown aggregation '{}' (expected min, max, avg "
                      "or sum)",
                      escapeForMessage(item)));
    }
  }
  return a;
}

Result<std::vector<std::string>> splitProgramArgs(std::string_view text) {
  std::vector<std::string> out;
  std::string word;
  bool inWord = false;
  size_t i = 0;
  auto unterminated = [&](char q) {
    return Status::invalidArgument(fmt::format("programArgs: unterminated {} quote in '{}'",
                                               q == '\'' ? "single" : "double",
                                               escapeForMessage(text)));
  };
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (inWord) out.push_back(std::move(word));
      word.clear();
      inWord = false;
      ++i;
      continue;
    }
    inWord = true;
    if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) return unterminated(c);
      word.append(text.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (c == '"') {
      ++i;
      bool closed = false;
      while (i < text.size()) {
        const char d = text[i];
        if (d == '"') {
          closed = true;
          ++i;
          break;
        }
        if (d == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) {
          word.push_back(text[i + 1]);
          i += 2;
          continue;
        }
        word.push_back(d);
        ++i;
      }
      if (!closed) return unterminated('"');
    } else if (c == '\\' && i + 1 < text.size()) {
      word.push_back(text[i + 1]);
      i += 2;
    } else {
      word.push_back(c);
      ++i;
    }
  }
  if (inWord) out.push_back(std::move(word));
  return out;
}

}  // namespace sluice::rest
