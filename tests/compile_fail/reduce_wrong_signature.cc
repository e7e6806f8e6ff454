// expect: KeyedStream<T, K>::reduce\(f\) accepts:
// A reduce function with one argument.
#include <sluice/sluice.h>

int main() {
  sluice::StreamExecutionEnvironment env;
  env.fromSequence(1, 10).keyBy([](int64_t x) { return x % 2; }).reduce([](int64_t x) {
    return x;
  });
}
