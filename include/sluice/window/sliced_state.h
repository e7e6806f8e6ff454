// The keyed state names of the two window operators, and the checks that
// keep one from silently restoring the other's state.
//
// The general window operator (internal/window_operator.h) keeps each
// window's contents in keyed state "window-contents" with the window as
// namespace, and timers. The sliced window operator
// (internal/slicing_window_operator.h) keeps its accumulators in memory and
// writes them to keyed state "window-slices" (one value per key) only while
// it takes a snapshot, with the slicing in operator state
// "window-slices-layout". The session window operator
// (internal/session_window_operator.h) likewise writes its sessions to keyed
// state "window-sessions" while it takes a snapshot. A snapshot of one is a
// valid restore of another only where the sliced operator can take over the
// general operator's tumbling windows, or the session operator the general
// operator's event-time sessions; everything else fails with an error that
// says how to restore instead. Task thread only.
#pragma once

#include <string>

namespace sluice {
class KeyedStateBackend;
}  // namespace sluice

namespace sluice::window {

inline constexpr const char* kGeneralWindowState = "window-contents";
inline constexpr const char* kSlicedWindowState = "window-slices";
inline constexpr const char* kSlicedWindowLayoutState = "window-slices-layout";
// Processing time: the windows of a key that fired and got elements again
// (they fire again with those alone), while a snapshot is taken.
inline constexpr const char* kSlicedWindowRefireState = "window-slices-refire";
inline constexpr const char* kSessionWindowState = "window-sessions";
// The general operator's MergingWindowSet (merging_window_set.h).
inline constexpr const char* kMergingWindowSetState = "merging-window-set";

// Whether keyed state `state` has an entry for any key of the backend
// (restored or written since).
bool hasKeyedEntries(KeyedStateBackend& backend, const std::string& state);

// Throws when the restored keyed state holds the sliced operator's slices
// or the session operator's sessions: the general operator (of operator
// `operatorName`) would never fire them.
void checkNoSlicedState(KeyedStateBackend& backend, const std::string& operatorName);

// The errors of the sliced operator `operatorName` (SluiceException):
// the restored general operator's window contents, which only tumbling
// windows take over; a snapshot cut for other windows (`restored`, this
// job's `current`); restored contents it cannot place (`what`).
[[noreturn]] void failGeneralStateNotSliceable(const std::string& operatorName,
                                               const std::string& windows);
[[noreturn]] void failLayoutChanged(const std::string& operatorName, const std::string& restored,
                                    const std::string& current);
[[noreturn]] void failGeneralStateImport(const std::string& operatorName, const std::string& what);

}  // namespace sluice::window
