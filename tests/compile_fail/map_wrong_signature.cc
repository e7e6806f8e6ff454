// expect: DataStream<T>::map\(f\) accepts:
// A map function that takes the wrong argument type.
#include <sluice/sluice.h>

int main() {
  sluice::StreamExecutionEnvironment env;
  env.fromSequence(1, 10).map([](const std::string& s) { return s.size(); });
}
