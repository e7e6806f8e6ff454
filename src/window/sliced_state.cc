#include <algorithm>
#include <string>
#include <vector>

#include <sluice/core/status.h>
#include <sluice/state/keyed_state_backend.h>
#include <sluice/window/sliced_state.h>

namespace sluice::window {

bool hasKeyedEntries(KeyedStateBackend& backend, const std::string& state) {
  const std::vector<std::string> names = backend.stateNames();
  if (std::find(names.begin(), names.end(), state) == names.end()) return false;
  bool any = false;
  backend.forEachKey(state, [&](std::string_view, int32_t) { any = true; });
  return any;
}

void checkNoSlicedState(KeyedStateBackend& backend, const std::string& operatorName) {
  if (hasKeyedEntries(backend, kSessionWindowState)) {
    throw SluiceException(
        "operator '" + operatorName +
        "': the restored state holds the sessions of the session window operator ('" +
        kSessionWindowState +
        "'), which this general window operator cannot fire. It was taken with "
        "pipeline.window.slicing: true and event-time session windows with a static gap; restore "
        "it with the same windows and pipeline.window.slicing: true (and the hashmap state "
        "backend)");
  }
  const bool slices = hasKeyedEntries(backend, kSlicedWindowState);
  if (!slices && !hasKeyedEntries(backend, kSlicedWindowRefireState)) return;
  throw SluiceException(
      "operator '" + operatorName + "': the restored state holds " +
      (slices ? std::string("the window slices") : std::string("windows to fire again")) +
      " of the sliced window operator ('" +
      (slices ? kSlicedWindowState : kSlicedWindowRefireState) +
      "'), which this general window operator cannot fire. It was taken with "
      "pipeline.window.slicing: true and windows the sliced operator runs; restore it with the "
      "same windows and pipeline.window.slicing: true (and the hashmap state backend)");
}

void failGeneralStateNotSliceable(const std::string& operatorName, const std::string& windows) {
  throw SluiceException("operator '" + operatorName +
                        "': the restored state holds window contents of the general window "
                        "operator ('" +
                        kGeneralWindowState +
                        "'), which the sliced window operator takes over "
                        "for tumbling windows only, not for " +
                        windows + ". Restore this snapshot with pipeline.window.slicing: false");
}

void failLayoutChanged(const std::string& operatorName, const std::string& restored,
                       const std::string& current) {
  throw SluiceException("operator '" + operatorName +
                        "': the restored window slices were cut for " + restored +
                        ", but the job's windows are now " + current +
                        "; the sliced window operator restores slices only into the same windows");
}

void failGeneralStateImport(const std::string& operatorName, const std::string& what) {
  throw SluiceException("operator '" + operatorName +
                        "': cannot take over the general window operator's state: " + what +
                        ". Restore this snapshot with pipeline.window.slicing: false");
}

}  // namespace sluice::window
