// The values in Flink's REST paths, query strings and request bodies, parsed
// as Flink's handlers parse them (flink-runtime rest/messages: JobIDPathParameter,
// SubtasksFilterQueryParameter, MetricsAggregationParameter, the jar handlers'
// program arguments). Internal to rest/web_monitor. Every parser returns an
// InvalidArgument Status whose message names the parameter and the bad value,
// which the endpoint sends back with 400.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/core/status.h>

namespace sluice::rest {

// Flink's JobID / JobVertexID / TriggerId text: 32 hex digits (any case).
bool isHexId(std::string_view text);

// "a, b,,c" -> {"a", "b", "c"}: comma separated, each item trimmed, empty
// items dropped (Flink's comma-separated query parameters).
std::vector<std::string> splitCommaList(std::string_view text);

// A decimal integer in [min, max]; `what` names it in the error
// ("query parameter 'parallelism'").
Result<int64_t> parseInteger(std::string_view text, std::string_view what, int64_t min,
                             int64_t max);

// "true" / "false" (any case); `what` names it in the error.
Result<bool> parseBoolean(std::string_view text, std::string_view what);

// Flink's `subtasks` filter: "0,2,5-7" -> the closed ranges {0,0}, {2,2}, {5,7}.
struct SubtaskSelection {
  std::vector<std::pair<int, int>> ranges;  // empty: every subtask
  bool contains(int subtask) const;
};
Result<SubtaskSelection> parseSubtaskSelection(std::string_view text);

// Flink's `agg` parameter: "min,max,avg,sum" in any case and order.
struct Aggregations {
  bool min = true;
  bool max = true;
  bool avg = true;
  bool sum = true;
};
Result<Aggregations> parseAggregations(std::string_view text);

// Program arguments in one string, split as a shell splits words: blanks
// separate, '...' is literal, "..." keeps blanks and takes \" and \\ as
// escapes, a backslash outside quotes escapes the next character. An
// unterminated quote is an error.
Result<std::vector<std::string>> splitProgramArgs(std::string_view text);

}  // namespace sluice::rest
