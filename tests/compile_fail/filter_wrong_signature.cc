// expect: DataStream<T>::filter\(f\) accepts:
// A filter that returns nothing.
#include <sluice/sluice.h>

int main() {
  sluice::StreamExecutionEnvironment env;
  env.fromSequence(1, 10).filter([](int64_t) {});
}
