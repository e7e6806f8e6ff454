#include "cluster/plan_mode.h"

#include <optional>

#include <fmt/format.h>

#include <sluice/core/status.h>

namespace sluice::cluster {
namespace {

struct PlanModeState {
  const Configuration* base = nullptr;
  std::optional<CapturedPlan> captured;
};

thread_local PlanModeState* current = nullptr;

RemoteExecutor& remoteExecutorSlot() {
  static RemoteExecutor executor;
  return executor;
}

}  // namespace

bool planModeActive() { return current != nullptr; }

const Configuration* planModeConfiguration() { return current ? current->base : nullptr; }

void capture(std::shared_ptr<StreamGraph> graph, Configuration configuration) {
  if (current == nullptr) throw SluiceException("capture() outside plan mode");
  if (current->captured) {
    throw SluiceException(
        "the job calls execute() more than once; a job submitted to a cluster runs one "
        "execute()");
  }
  current->captured = CapturedPlan{std::move(graph), std::move(configuration)};
  throw PlanCaptured{};
}

CapturedPlan capturePlan(JobMain main, const std::string& libraryName,
                         const std::vector<std::string>& args, const Configuration& configuration) {
  PlanModeState state;
  state.base = &configuration;
  std::vector<std::string> storage;
  storage.push_back(libraryName);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  PlanModeState* previous = current;
  current = &state;
  int rc = 0;
  std::string failure;
  try {
    rc = main(static_cast<int>(storage.size()), argv.data());
  } catch (const PlanCaptured&) {
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "an exception that is no std::exception";
  }
  current = previous;
  if (state.captured) return std::move(*state.captured);
  if (!failure.empty()) {
    throw SluiceException(fmt::format("the main() of {} failed before it called execute(): {}",
                                      libraryName, failure));
  }
  throw SluiceException(fmt::format(
      "the main() of {} returned {} without calling execute(): nothing to run (a job submitted "
      "to a cluster must build its pipeline and call env.execute())",
      libraryName, rc));
}

void setRemoteExecutor(RemoteExecutor executor) { remoteExecutorSlot() = std::move(executor); }

const RemoteExecutor& remoteExecutor() { return remoteExecutorSlot(); }

}  // namespace sluice::cluster
