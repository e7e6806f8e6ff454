// expect: DataStream<T>::broadcast\(descriptors...\) accepts sluice::MapStateDescriptor
// Broadcast state is a map: a list state descriptor is not accepted.
#include <cstdint>
#include <string>

#include <sluice/broadcast.h>
#include <sluice/sluice.h>

int main() {
  sluice::StreamExecutionEnvironment env;
  env.fromElements(std::string("rule")).broadcast(sluice::ListStateDescriptor<int64_t>("rules"));
}
