// The RocksDB backend's storages: each access serializes the entry's key
// ([key group | key | namespace], plus the user key for map state) and its
// value with the state's StateTypes and calls the backend's byte-level
// methods. List add() is a merge operand the merge operator appends, so it
// never reads the list.
#include <string>
#include <utility>
#include <vector>

#include <sluice/state/snapshot.h>

#include "state/rocksdb_keyed_backend.h"
#include "state/runtime_types.h"

namespace sluice {

namespace {

using internal::ObjectBuffer;
using internal::StateType;

std::string_view bytesView(const std::vector<uint8_t>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Decodes exactly `bytes` into `into` (reset to a fresh object first);
// trailing bytes are corruption.
void decodeStored(const StateType& type, std::string_view bytes, ObjectBuffer& into,
                  const std::string& stateName) {
  into.reset();
  DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  type.deserialize(into.get(), in);
  if (in.remaining() != 0) {
    throw SerializationError("state '" + stateName + "': " + std::to_string(in.remaining()) +
                             " bytes left over after decoding a stored " + type.schema());
  }
}

// What every RocksDB storage shares: its column family, the current
// namespace's bytes and reusable key and value buffers.
class RocksDbStorage {
 protected:
  RocksDbStorage(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta)
      : backend_(backend), cf_(backend.columnFamily(meta)), name_(meta.name) {}

  void setNamespaceBytes(std::string_view ns) { ns_.assign(ns.data(), ns.size()); }

  // [kg | key | namespace] of the current key and namespace, in keyBuf_.
  std::string_view buildKey() {
    if (backend_.currentKeyGroup() < 0) [[unlikely]] {
      throw SluiceException("state '" + name_ + "' was accessed before any key was set");
    }
    const std::string_view k = backend_.currentKeyWithGroup();
    keyBuf_.assign(k.begin(), k.end());
    keyBuf_.insert(keyBuf_.end(), ns_.begin(), ns_.end());
    return bytesView(keyBuf_);
  }

  // [kg | key | namespace | user key] in keyBuf_.
  std::string_view buildUserKey(const StateType& type, const void* userKey) {
    buildKey();
    DataOutputView out(keyBuf_);
    type.serialize(userKey, out);
    return bytesView(keyBuf_);
  }

  std::string_view encode(const StateType& type, const void* value) {
    valueOut_.clear();
    DataOutputView out(valueOut_);
    type.serialize(value, out);
    return bytesView(valueOut_);
  }

  void appendElements(const StateType& type, const void* elements, size_t count) {
    const char* p = static_cast<const char*>(elements);
    for (size_t i = 0; i < count; ++i) {
      const size_t begin = beginListElement(valueOut_);
      DataOutputView out(valueOut_);
      type.serialize(p + i * type.size(), out);
      endListElement(valueOut_, begin);
    }
  }

  RocksDbKeyedStateBackend& backend_;
  RocksDbKeyedStateBackend::ColumnFamily& cf_;
  std::string name_;
  std::string ns_;
  std::vector<uint8_t> keyBuf_;
  std::vector<uint8_t> valueOut_;
  std::string valueIn_;
};

class RocksDbValueStorage final : public internal::ValueStorage, private RocksDbStorage {
 public:
  RocksDbValueStorage(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta,
                      std::shared_ptr<const StateType> type)
      : RocksDbStorage(backend, meta), type_(std::move(type)), value_(*type_) {}

  void setNamespace(std::string_view ns) override { setNamespaceBytes(ns); }
  const void* get() override {
    if (!backend_.get(cf_, buildKey(), valueIn_)) return nullptr;
    decodeStored(*type_, valueIn_, value_, name_);
    return value_.get();
  }
  void put(const void* value) override {
    const std::string_view bytes = encode(*type_, value);
    backend_.put(cf_, buildKey(), bytes);
  }
  void clear() override { backend_.remove(cf_, buildKey()); }

 private:
  std::shared_ptr<const StateType> type_;
  ObjectBuffer value_;
};

class RocksDbListStorage final : public internal::ListStorage, private RocksDbStorage {
 public:
  RocksDbListStorage(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta,
                     std::shared_ptr<const StateType> element)
      : RocksDbStorage(backend, meta),
        list_(std::make_shared<internal::ListType>(std::move(element))),
        result_(*list_) {}

  void setNamespace(std::string_view ns) override { setNamespaceBytes(ns); }

  internal::ElementSpan get() override {
    list_->clear(result_.get());
    if (!backend_.get(cf_, buildKey(), valueIn_)) return {};
    ListValueReader reader(valueIn_);
    std::string_view element;
    const StateType& type = list_->element();
    while (reader.next(element)) {
      DataInputView in(reinterpret_cast<const uint8_t*>(element.data()), element.size());
      type.deserialize(list_->emplaceBack(result_.get()), in);
      if (in.remaining() != 0) {
        throw SerializationError("state '" + name_ + "': " + std::to_string(in.remaining()) +
                                 " bytes left over after decoding a stored " + type.schema());
      }
    }
    const auto* v = static_cast<const internal::ErasedVector*>(result_.get());
    return {v->data, v->size};
  }

  void add(const void* element) override {
    valueOut_.clear();
    appendElements(list_->element(), element, 1);
    backend_.merge(cf_, buildKey(), bytesView(valueOut_));
  }
  void addAll(const void* elements, size_t count) override {
    if (count == 0) return;
    valueOut_.clear();
    appendElements(list_->element(), elements, count);
    backend_.merge(cf_, buildKey(), bytesView(valueOut_));
  }
  void update(const void* elements, size_t count) override {
    if (count == 0) {
      clear();
      return;
    }
    valueOut_.clear();
    appendElements(list_->element(), elements, count);
    backend_.put(cf_, buildKey(), bytesView(valueOut_));
  }
  void clear() override { backend_.remove(cf_, buildKey()); }

  // Moves the stored bytes without decoding them: source lists are read,
  // removed, and their concatenation appended to the target with one merge.
  void mergeNamespaces(std::string_view target, const std::vector<std::string>& sources) override {
    std::vector<uint8_t> merged;
    for (const std::string& s : sources) {
      setNamespaceBytes(s);
      const std::string_view key = buildKey();
      if (!backend_.get(cf_, key, valueIn_)) continue;
      merged.insert(merged.end(), valueIn_.begin(), valueIn_.end());
      backend_.remove(cf_, key);
    }
    setNamespaceBytes(target);
    if (!merged.empty()) backend_.merge(cf_, buildKey(), bytesView(merged));
  }

 private:
  std::shared_ptr<const internal::ListType> list_;
  ObjectBuffer result_;
};

class RocksDbMapStorage final : public internal::MapStorage, private RocksDbStorage {
 public:
  RocksDbMapStorage(RocksDbKeyedStateBackend& backend, const StateMetaInfo& meta,
                    std::shared_ptr<const StateType> userKey,
                    std::shared_ptr<const StateType> userValue)
      : RocksDbStorage(backend, meta),
        key_(std::move(userKey)),
        value_(std::move(userValue)),
        valueBuffer_(*value_) {}

  void setNamespace(std::string_view ns) override { setNamespaceBytes(ns); }

  const void* get(const void* userKey) override {
    if (!backend_.get(cf_, buildUserKey(*key_, userKey), valueIn_)) return nullptr;
    decodeStored(*value_, valueIn_, valueBuffer_, name_);
    return valueBuffer_.get();
  }
  void put(const void* userKey, const void* userValue) override {
    const std::string_view bytes = encode(*value_, userValue);
    backend_.put(cf_, buildUserKey(*key_, userKey), bytes);
  }
  void remove(const void* userKey) override { backend_.remove(cf_, buildUserKey(*key_, userKey)); }
  bool contains(const void* userKey) override {
    return backend_.get(cf_, buildUserKey(*key_, userKey), valueIn_);
  }
  bool isEmpty() override { return !backend_.iteratePrefix(cf_, buildKey()).valid(); }
  void clear() override { backend_.removePrefix(cf_, buildKey()); }
  std::unique_ptr<internal::MapCursor> iterator() override {
    return std::make_unique<Cursor>(*this, buildKey());
  }

 private:
  // Iterates the entries as they were when it was created (a RocksDB
  // iterator's implicit snapshot), so removing entries meanwhile is safe.
  class Cursor final : public internal::MapCursor {
   public:
    Cursor(RocksDbMapStorage& storage, std::string_view prefix)
        : storage_(storage),
          it_(storage.backend_.iteratePrefix(storage.cf_, prefix)),
          prefixSize_(prefix.size()),
          key_(*storage.key_),
          value_(*storage.value_) {}

    bool hasNext() override { return it_.valid(); }

    void next(const void*& key, const void*& value) override {
      if (!it_.valid()) {
        throw SluiceException("MapStateIterator of state '" + storage_.name_ +
                              "': next() called with no entries left");
      }
      const std::string_view k = it_.key();
      decodeStored(*storage_.key_, k.substr(prefixSize_), key_, storage_.name_);
      decodeStored(*storage_.value_, it_.value(), value_, storage_.name_);
      lastKey_.assign(k.data(), k.size());
      canRemove_ = true;
      it_.next();
      key = key_.get();
      value = value_.get();
    }

    void remove() override {
      if (!canRemove_) {
        throw SluiceException("MapStateIterator of state '" + storage_.name_ +
                              "': remove() must follow a next() (at most once each)");
      }
      storage_.backend_.remove(storage_.cf_, lastKey_);
      canRemove_ = false;
    }

   private:
    RocksDbMapStorage& storage_;
    RocksDbKeyedStateBackend::PrefixIterator it_;
    size_t prefixSize_;
    ObjectBuffer key_;
    ObjectBuffer value_;
    std::string lastKey_;
    bool canRemove_ = false;
  };

  std::shared_ptr<const StateType> key_;
  std::shared_ptr<const StateType> value_;
  ObjectBuffer valueBuffer_;
};

}  // namespace

std::unique_ptr<internal::ValueStorage> RocksDbKeyedStateBackend::createValueStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  return std::make_unique<RocksDbValueStorage>(*this, meta, std::move(types.value));
}

std::unique_ptr<internal::ListStorage> RocksDbKeyedStateBackend::createListStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  return std::make_unique<RocksDbListStorage>(*this, meta, std::move(types.value));
}

std::unique_ptr<internal::MapStorage> RocksDbKeyedStateBackend::createMapStorage(
    const StateMetaInfo& meta, StorageTypes types) {
  return std::make_unique<RocksDbMapStorage>(*this, meta, std::move(types.userKey),
                                             std::move(types.value));
}

}  // namespace sluice
