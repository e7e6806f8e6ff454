// The state backends Sluice comes with. Adding one: write its
// KeyedStateBackend and KeyedStateBackendFactory in src/state, and list its
// factory in builtin_backends.cc.
#pragma once

#include <memory>
#include <vector>

#include <sluice/state/keyed_state_backend.h>

namespace sluice::internal {

std::unique_ptr<KeyedStateBackendFactory> makeHashMapBackendFactory();
std::unique_ptr<KeyedStateBackendFactory> makeRocksDbBackendFactory();
std::unique_ptr<KeyedStateBackendFactory> makeTieredBackendFactory();

// Every built-in factory, registered when the registry is first used.
std::vector<std::unique_ptr<KeyedStateBackendFactory>> builtinKeyedStateBackendFactories();

}  // namespace sluice::internal
