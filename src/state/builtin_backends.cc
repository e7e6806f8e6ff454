#include "state/backend_factories.h"

namespace sluice::internal {

std::vector<std::unique_ptr<KeyedStateBackendFactory>> builtinKeyedStateBackendFactories() {
  std::vector<std::unique_ptr<KeyedStateBackendFactory>> factories;
  factories.push_back(makeHashMapBackendFactory());
  factories.push_back(makeRocksDbBackendFactory());
  factories.push_back(makeTieredBackendFactory());
  return factories;
}

}  // namespace sluice::internal
