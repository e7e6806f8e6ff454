// makeOwned<T>(args...): a new T for a smart pointer of one of its bases,
// without the smart-pointer machinery of T itself.
//
// The API's templates create many small classes per record type and per
// user function (operators, outputs, selectors, triggers, factories). Each
// std::make_unique<T> / std::make_shared<T> instantiates unique_ptr<T> or a
// control block for T: a dozen functions that a debug build emits and
// instruments one by one. makeOwned<T> converts straight into
// std::unique_ptr<Base> or std::shared_ptr<Base> (one set of functions per
// base, shared by every derived type):
//
//   std::unique_ptr<OutputBase> out = makeOwned<ChainedOutput<T>>(target, 0);
//   return makeOwned<RoundRobinSelector<T>>(channels, subtask);  // unique_ptr<ChannelSelector<T>>
//
// `Base` must have a virtual destructor (checked). An Owned that is never
// converted deletes its object.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace sluice::internal {

template <class Base>
void deleteAs(Base* p) noexcept {
  delete p;
}

template <class T>
class [[nodiscard]] Owned {
 public:
  explicit Owned(T* p) noexcept : p_(p) {}
  Owned(Owned&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { delete p_; }

  template <class Base>
  operator std::unique_ptr<Base>() && {  // NOLINT: implicit by design
    static_assert(std::is_same_v<std::remove_cv_t<Base>, T> ||
                      std::has_virtual_destructor_v<std::remove_cv_t<Base>>,
                  "makeOwned: the base needs a virtual destructor");
    return std::unique_ptr<Base>(std::exchange(p_, nullptr));
  }
  template <class Base>
  operator std::shared_ptr<Base>() && {  // NOLINT: implicit by design
    static_assert(std::is_same_v<std::remove_cv_t<Base>, T> ||
                      std::has_virtual_destructor_v<std::remove_cv_t<Base>>,
                  "makeOwned: the base needs a virtual destructor");
    return std::shared_ptr<Base>(static_cast<Base*>(std::exchange(p_, nullptr)), &deleteAs<Base>);
  }

 private:
  T* p_;
};

template <class T, class... Args>
Owned<T> makeOwned(Args&&... args) {
  return Owned<T>(new T(std::forward<Args>(args)...));
}

}  // namespace sluice::internal
