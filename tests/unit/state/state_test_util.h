// Helpers for keyed-state tests (in namespace sluice, so tests inside it
// call them unqualified): setting a typed key on an untyped backend,
// and backend parameters for a key type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <sluice/core/key_hash.h>
#include <sluice/core/serializer.h>
#include <sluice/state/keyed_state_backend.h>

namespace sluice {

// The bytes TypeSerializer<K> writes for `key`.
template <class K>
std::vector<uint8_t> testKeyBytes(const K& key) {
  std::vector<uint8_t> bytes;
  DataOutputView out(bytes);
  TypeSerializer<K>::serialize(key, out);
  return bytes;
}

// Makes `key` the backend's current key, in the key group keyBy would give it.
template <class K>
void setKey(KeyedStateBackend& backend, const K& key) {
  const std::vector<uint8_t> bytes = testKeyBytes(key);
  backend.setCurrentKey(bytes.data(), bytes.size(),
                        assignToKeyGroup(key, backend.params().maxParallelism));
}

// RocksDB info log files (LOG, LOG.old.*) anywhere below `dir`: there
// should be none (RocksDB's log goes to Sluice's log, docs/state.md).
inline std::vector<std::string> rocksDbLogFilesBelow(const std::filesystem::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == "LOG" || name.rfind("LOG.", 0) == 0) found.push_back(e.path().string());
  }
  return found;
}

// The key a forEachKey callback received, decoded.
template <class K>
K decodeTestKey(std::string_view bytes) {
  K key{};
  DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  TypeSerializer<K>::deserialize(key, in);
  return key;
}

// Backend parameters for keys of type K: key schema, and a keyLength that
// decodes one K and returns the bytes it took.
template <class K>
KeyedBackendParams paramsFor(KeyGroupRange range, int maxParallelism = 128) {
  KeyedBackendParams params;
  params.operatorName = "test-operator";
  params.maxParallelism = maxParallelism;
  params.keyGroupRange = range;
  params.keySchema = TypeSerializer<K>::schema();
  params.keyLength = [](const uint8_t* data, size_t size) -> size_t {
    DataInputView in(data, size);
    K key{};
    TypeSerializer<K>::deserialize(key, in);
    return in.position();
  };
  return params;
}

}  // namespace sluice
