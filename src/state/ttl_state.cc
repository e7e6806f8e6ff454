#include "state/ttl_state.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/state/snapshot.h>

namespace sluice::internal {

namespace {

// What the three decorators share: the config, the clock and the stored
// type.
class TtlDecorator {
 protected:
  TtlDecorator(std::shared_ptr<const TtlType> type, const StateTtlConfig& config,
               const Clock& clock)
      : type_(std::move(type)),
        ttlMillis_(config.getTtl().count()),
        updateOnRead_(config.getUpdateType() == StateTtlConfig::UpdateType::kOnReadAndWrite),
        returnExpired_(config.getStateVisibility() ==
                       StateTtlConfig::StateVisibility::kReturnExpiredIfNotCleanedUp),
        clock_(&clock) {}

  int64_t now() const { return clock_->currentTimeMillis(); }
  bool expired(const void* ttlValue, int64_t at) const {
    return ttl::expired(TtlType::timestamp(ttlValue), ttlMillis_, at);
  }
  const StateType& inner() const { return type_->inner(); }

  const std::shared_ptr<const TtlType> type_;
  const int64_t ttlMillis_;
  const bool updateOnRead_;
  const bool returnExpired_;
  const Clock* const clock_;
};

class TtlValueStorage final : public ValueStorage, private TtlDecorator {
 public:
  TtlValueStorage(std::unique_ptr<ValueStorage> original, std::shared_ptr<const TtlType> type,
                  const StateTtlConfig& config, const Clock& clock)
      : TtlDecorator(std::move(type), config, clock),
        original_(std::move(original)),
        stored_(*type_),
        value_(inner()) {}

  void setNamespace(std::string_view ns) override { original_->setNamespace(ns); }

  const void* get() override {
    const void* stored = original_->get();
    if (stored == nullptr) return nullptr;
    const int64_t t = now();
    if (expired(stored, t)) {
      if (returnExpired_) inner().copyAssign(value_.get(), type_->value(stored));
      original_->clear();
      return returnExpired_ ? value_.get() : nullptr;
    }
    if (!updateOnRead_) return type_->value(stored);
    type_->copyAssign(stored_.get(), stored);
    TtlType::setTimestamp(stored_.get(), t);
    original_->put(stored_.get());
    return type_->value(stored_.get());
  }

  void put(const void* value) override {
    inner().copyAssign(type_->value(stored_.get()), value);
    TtlType::setTimestamp(stored_.get(), now());
    original_->put(stored_.get());
  }

  void clear() override { original_->clear(); }

 private:
  std::unique_ptr<ValueStorage> original_;
  ObjectBuffer stored_;  // a TtlType object being written
  ObjectBuffer value_;   // an expired value returned once
};

class TtlListStorage final : public ListStorage, private TtlDecorator {
 public:
  TtlListStorage(std::unique_ptr<ListStorage> original, std::shared_ptr<const TtlType> type,
                 const StateTtlConfig& config, const Clock& clock)
      : TtlDecorator(type, config, clock),
        original_(std::move(original)),
        values_(std::make_shared<ListType>(std::shared_ptr<const StateType>(type, &type->inner()))),
        stored_(std::make_shared<ListType>(type)),
        result_(*values_),
        kept_(*stored_) {}

  void setNamespace(std::string_view ns) override { original_->setNamespace(ns); }

  ElementSpan get() override {
    const ElementSpan stored = original_->get();
    values_->clear(result_.get());
    if (stored.size == 0) return {};
    const size_t size = type_->size();
    auto element = [&](size_t i) { return static_cast<const char*>(stored.data) + i * size; };
    const int64_t t = now();
    size_t numExpired = 0;
    for (size_t i = 0; i < stored.size; ++i) numExpired += expired(element(i), t) ? 1 : 0;

    if (numExpired == 0 && !updateOnRead_) {
      // Nothing to write back: hand the stored elements out as they are.
      for (size_t i = 0; i < stored.size; ++i) {
        values_->pushBack(result_.get(), type_->value(element(i)));
      }
      return span(result_.get(), *values_);
    }
    if (numExpired == stored.size) {
      if (returnExpired_) {
        for (size_t i = 0; i < stored.size; ++i) {
          values_->pushBack(result_.get(), type_->value(element(i)));
        }
      }
      original_->clear();
      return span(result_.get(), *values_);
    }
    stored_->clear(kept_.get());
    for (size_t i = 0; i < stored.size; ++i) {
      const void* e = element(i);
      if (expired(e, t)) {
        if (returnExpired_) values_->pushBack(result_.get(), type_->value(e));
        continue;
      }
      values_->pushBack(result_.get(), type_->value(e));
      void* k = stored_->emplaceBack(kept_.get());
      type_->copyAssign(k, e);
      if (updateOnRead_) TtlType::setTimestamp(k, t);
    }
    const ElementSpan kept = span(kept_.get(), *stored_);
    original_->update(kept.data, kept.size);
    return span(result_.get(), *values_);
  }

  void add(const void* element) override {
    stored_->clear(kept_.get());
    withTimestamp(element, now());
    original_->add(stored_->at(kept_.get(), 0));
  }
  void addAll(const void* elements, size_t count) override {
    if (count == 0) return;
    const ElementSpan s = stamp(elements, count);
    original_->addAll(s.data, s.size);
  }
  void update(const void* elements, size_t count) override {
    const ElementSpan s = stamp(elements, count);
    original_->update(s.data, s.size);
  }
  void clear() override { original_->clear(); }

  // Moves the stored elements, each with its own timestamp (as Flink).
  void mergeNamespaces(std::string_view target, const std::vector<std::string>& sources) override {
    original_->mergeNamespaces(target, sources);
  }

 private:
  static ElementSpan span(const void* list, const ListType& type) {
    (void)type;
    const auto* v = static_cast<const ErasedVector*>(list);
    return {v->data, v->size};
  }
  // Appends `element` with timestamp `t` to kept_.
  void withTimestamp(const void* element, int64_t t) {
    void* k = stored_->emplaceBack(kept_.get());
    inner().copyAssign(type_->value(k), element);
    TtlType::setTimestamp(k, t);
  }
  ElementSpan stamp(const void* elements, size_t count) {
    stored_->clear(kept_.get());
    stored_->reserve(kept_.get(), count);
    const int64_t t = now();
    const size_t size = inner().size();
    for (size_t i = 0; i < count; ++i) {
      withTimestamp(static_cast<const char*>(elements) + i * size, t);
    }
    return span(kept_.get(), *stored_);
  }

  std::unique_ptr<ListStorage> original_;
  std::shared_ptr<const ListType> values_;  // lists of the user's elements
  std::shared_ptr<const ListType> stored_;  // lists of TtlType elements
  ObjectBuffer result_;                     // what get() returns
  ObjectBuffer kept_;                       // what is written back
};

class TtlMapStorage final : public MapStorage, private TtlDecorator {
 public:
  TtlMapStorage(std::unique_ptr<MapStorage> original, std::shared_ptr<const TtlType> type,
                std::shared_ptr<const StateType> userKey, const StateTtlConfig& config,
                const Clock& clock)
      : TtlDecorator(std::move(type), config, clock),
        original_(std::move(original)),
        userKey_(std::move(userKey)),
        stored_(*type_),
        value_(inner()) {}

  void setNamespace(std::string_view ns) override { original_->setNamespace(ns); }

  const void* get(const void* userKey) override {
    const void* stored = original_->get(userKey);
    if (stored == nullptr) return nullptr;
    const int64_t t = now();
    if (expired(stored, t)) {
      if (returnExpired_) inner().copyAssign(value_.get(), type_->value(stored));
      original_->remove(userKey);
      return returnExpired_ ? value_.get() : nullptr;
    }
    if (!updateOnRead_) return type_->value(stored);
    type_->copyAssign(stored_.get(), stored);
    TtlType::setTimestamp(stored_.get(), t);
    original_->put(userKey, stored_.get());
    return type_->value(stored_.get());
  }
  void put(const void* userKey, const void* userValue) override {
    inner().copyAssign(type_->value(stored_.get()), userValue);
    TtlType::setTimestamp(stored_.get(), now());
    original_->put(userKey, stored_.get());
  }
  void remove(const void* userKey) override { original_->remove(userKey); }
  bool contains(const void* userKey) override { return get(userKey) != nullptr; }
  bool isEmpty() override {
    if (returnExpired_) return original_->isEmpty();
    const int64_t t = now();
    for (auto it = original_->iterator(); it->hasNext();) {
      const void* k = nullptr;
      const void* v = nullptr;
      it->next(k, v);
      if (!expired(v, t)) return false;
      it->remove();
    }
    return true;
  }
  void clear() override { original_->clear(); }
  std::unique_ptr<MapCursor> iterator() override {
    return std::make_unique<Cursor>(*this, original_->iterator());
  }

 private:
  // Skips (and removes) expired entries of the wrapped cursor. Looks ahead at
  // most one stored entry, so remove() goes through the wrapped cursor when
  // it still stands on the returned entry and through the storage otherwise.
  class Cursor final : public MapCursor {
   public:
    Cursor(TtlMapStorage& storage, std::unique_ptr<MapCursor> original)
        : storage_(storage),
          original_(std::move(original)),
          pendingKey_(*storage.userKey_),
          pendingValue_(storage.inner()),
          currentKey_(*storage.userKey_),
          currentValue_(storage.inner()),
          stored_(*storage.type_) {}

    bool hasNext() override {
      while (!pending_ && original_->hasNext()) {
        const void* k = nullptr;
        const void* v = nullptr;
        original_->next(k, v);
        // The wrapped cursor has moved past the entry next() returned.
        if (last_ == Last::kUnderIterator) last_ = Last::kBehindIterator;
        pendingRemoved_ = false;
        const StateType& keyType = *storage_.userKey_;
        keyType.copyAssign(pendingKey_.get(), k);
        const int64_t t = storage_.now();
        if (storage_.expired(v, t)) {
          if (storage_.returnExpired_) {
            storage_.inner().copyAssign(pendingValue_.get(), storage_.type_->value(v));
          }
          original_->remove();
          pendingRemoved_ = true;
          if (!storage_.returnExpired_) continue;
        } else {
          storage_.inner().copyAssign(pendingValue_.get(), storage_.type_->value(v));
          if (storage_.updateOnRead_) {
            storage_.type_->copyAssign(stored_.get(), v);
            TtlType::setTimestamp(stored_.get(), t);
            storage_.original_->put(pendingKey_.get(), stored_.get());
          }
        }
        pending_ = true;
      }
      return pending_;
    }

    void next(const void*& key, const void*& value) override {
      if (!hasNext()) {
        throw SluiceException("MapStateIterator::next() called after the last entry");
      }
      storage_.userKey_->moveAssign(currentKey_.get(), pendingKey_.get());
      storage_.inner().moveAssign(currentValue_.get(), pendingValue_.get());
      pending_ = false;
      last_ = pendingRemoved_ ? Last::kRemoved : Last::kUnderIterator;
      key = currentKey_.get();
      value = currentValue_.get();
    }

    void remove() override {
      switch (last_) {
        case Last::kNone: throw SluiceException("MapStateIterator::remove() called before next()");
        case Last::kRemoved: return;
        case Last::kUnderIterator: original_->remove(); break;
        case Last::kBehindIterator: storage_.original_->remove(currentKey_.get()); break;
      }
      last_ = Last::kRemoved;
    }

   private:
    // Where the entry the last next() returned is.
    enum class Last : uint8_t {
      kNone,            // next() has not been called
      kUnderIterator,   // the wrapped cursor's current entry
      kBehindIterator,  // passed by the wrapped cursor; remove by key
      kRemoved,         // already gone from storage
    };

    TtlMapStorage& storage_;
    std::unique_ptr<MapCursor> original_;
    ObjectBuffer pendingKey_;  // found by hasNext(), not yet returned
    ObjectBuffer pendingValue_;
    ObjectBuffer currentKey_;  // what next() returned last
    ObjectBuffer currentValue_;
    ObjectBuffer stored_;  // a refreshed entry being written
    bool pending_ = false;
    bool pendingRemoved_ = false;  // the pending entry was expired and is removed
    Last last_ = Last::kNone;
  };

  std::unique_ptr<MapStorage> original_;
  std::shared_ptr<const StateType> userKey_;
  ObjectBuffer stored_;  // a TtlType object being written
  ObjectBuffer value_;   // an expired value returned once
};

}  // namespace

std::unique_ptr<ValueStorage> makeTtlValueStorage(std::unique_ptr<ValueStorage> original,
                                                  std::shared_ptr<const TtlType> ttlType,
                                                  const StateTtlConfig& config,
                                                  const Clock& clock) {
  return std::make_unique<TtlValueStorage>(std::move(original), std::move(ttlType), config, clock);
}

std::unique_ptr<ListStorage> makeTtlListStorage(std::unique_ptr<ListStorage> original,
                                                std::shared_ptr<const TtlType> ttlType,
                                                const StateTtlConfig& config, const Clock& clock) {
  return std::make_unique<TtlListStorage>(std::move(original), std::move(ttlType), config, clock);
}

std::unique_ptr<MapStorage> makeTtlMapStorage(std::unique_ptr<MapStorage> original,
                                              std::shared_ptr<const TtlType> ttlType,
                                              std::shared_ptr<const StateType> userKey,
                                              const StateTtlConfig& config, const Clock& clock) {
  return std::make_unique<TtlMapStorage>(std::move(original), std::move(ttlType),
                                         std::move(userKey), config, clock);
}

}  // namespace sluice::internal
