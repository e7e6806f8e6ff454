#include <cxxabi.h>

#include <cstdlib>
#include <typeinfo>

#include <sluice/graph/operator.h>

namespace sluice {

namespace {
std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = (status == 0 && out != nullptr) ? out : name;
  std::free(out);
  return s;
}
}  // namespace

std::string describeCurrentException() {
  try {
    throw;
  } catch (const OperatorFailure& e) {
    return e.what();
  } catch (const std::exception& e) {
    return demangle(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    const std::type_info* t = abi::__cxa_current_exception_type();
    return "exception of type " + (t != nullptr ? demangle(t->name()) : std::string("unknown"));
  }
}

}  // namespace sluice
