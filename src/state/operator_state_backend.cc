// OperatorStateBackend: snapshot, restore and repartitioning of operator
// state (the format is documented in operator_state.h).
//
// Snapshots are parsed into views over the caller's bytes; every element is
// length-prefixed, so restore() checks the framing of the whole snapshot
// without knowing the element types, and repartition() slices lists into
// elements and copies them without deserializing anything.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sluice/state/operator_state.h>

#include "core/text.h"

namespace sluice {

namespace {

constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'O', 'S'};
constexpr uint32_t kFormatVersion = 1;

// One state of a parsed snapshot; the views point into the snapshot.
struct ParsedState {
  std::string name;
  OperatorStateMode mode = OperatorStateMode::kSplitDistribute;
  std::string schema;
  std::string valueSchema;
  uint64_t count = 0;
  std::string_view elements;
  // Each element's encoding, length prefix included (list modes only).
  std::vector<std::string_view> split;
};

std::string modeAndSchema(const ParsedState& s) {
  std::string out = std::string(operatorStateModeName(s.mode)) + " of " + s.schema;
  if (s.mode == OperatorStateMode::kBroadcast) out += " -> " + s.valueSchema;
  return out;
}

// Walks the elements of `s` and checks their framing; fills `s.split` for
// list states. `base` is the offset of the elements within the snapshot.
void checkElements(ParsedState& s, size_t base, const std::string& source) {
  DataInputView in(reinterpret_cast<const uint8_t*>(s.elements.data()), s.elements.size());
  try {
    const bool isList = s.mode != OperatorStateMode::kBroadcast;
    if (s.count > s.elements.size()) {
      in.failAt(0, "element count " + std::to_string(s.count) + " exceeds the " +
                       std::to_string(s.elements.size()) + " bytes of elements");
    }
    if (isList) s.split.reserve(static_cast<size_t>(s.count));
    for (uint64_t i = 0; i < s.count; ++i) {
      const size_t start = in.position();
      in.readStringView();
      if (!isList) in.readStringView();
      if (isList) s.split.push_back(s.elements.substr(start, in.position() - start));
    }
    if (in.remaining() != 0) {
      in.failAt(in.position(), std::to_string(in.remaining()) + " bytes follow the last of " +
                                   std::to_string(s.count) + " elements");
    }
  } catch (const SerializationError& e) {
    throw SerializationError(source + ": state '" + escapeForMessage(s.name) +
                             "' (elements start at byte offset " + std::to_string(base) +
                             "): " + e.what());
  }
}

std::vector<ParsedState> parseSnapshot(const std::string& bytes, const std::string& source) {
  std::vector<ParsedState> states;
  if (bytes.empty()) return states;
  DataInputView in(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  try {
    char magic[sizeof(kMagic)];
    in.readBytes(magic, sizeof(magic));
    if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
      in.failAt(0, "not an operator state snapshot (bad magic)");
    }
    const uint32_t version = in.readU32();
    if (version != kFormatVersion) {
      in.failAt(8, "unsupported operator state snapshot version " + std::to_string(version) +
                       " (this build reads version " + std::to_string(kFormatVersion) + ")");
    }
    const uint64_t n = in.readVarUintFor("number of states");
    // Each state takes at least 6 bytes.
    if (n > in.remaining() / 6) {
      in.failAt(in.position(), "state count " + std::to_string(n) + " cannot fit in the " +
                                   std::to_string(in.remaining()) + " bytes that remain");
    }
    for (uint64_t i = 0; i < n; ++i) {
      ParsedState s;
      const size_t stateStart = in.position();
      s.name = std::string(in.readStringView());
      const uint8_t mode = in.readU8();
      if (mode > static_cast<uint8_t>(OperatorStateMode::kBroadcast)) {
        in.failAt(in.position() - 1, "state '" + escapeForMessage(s.name) + "' has unknown mode " +
                                         std::to_string(mode));
      }
      s.mode = static_cast<OperatorStateMode>(mode);
      s.schema = std::string(in.readStringView());
      s.valueSchema = std::string(in.readStringView());
      s.count = in.readVarUintFor("element count");
      s.elements = in.readStringView();
      for (const ParsedState& earlier : states) {
        if (earlier.name == s.name) {
          in.failAt(stateStart, "state '" + escapeForMessage(s.name) + "' appears twice");
        }
      }
      checkElements(s, in.position() - s.elements.size(), source);
      states.push_back(std::move(s));
    }
    if (in.remaining() != 0) {
      in.failAt(in.position(), std::to_string(in.remaining()) + " bytes follow the last state");
    }
  } catch (const SerializationError& e) {
    if (std::string_view(e.what()).starts_with(source)) throw;
    throw SerializationError(source + ": " + e.what());
  }
  return states;
}

void writeState(DataOutputView& out, const std::string& name, OperatorStateMode mode,
                const std::string& schema, const std::string& valueSchema, uint64_t count,
                std::string_view elements) {
  out.writeString(name);
  out.writeU8(static_cast<uint8_t>(mode));
  out.writeString(schema);
  out.writeString(valueSchema);
  out.writeVarUint(count);
  out.writeString(elements);
}

void writeHeader(DataOutputView& out, uint64_t numStates) {
  out.writeBytes(kMagic, sizeof(kMagic));
  out.writeU32(kFormatVersion);
  out.writeVarUint(numStates);
}

std::string toString(const std::vector<uint8_t>& buf) {
  return std::string(reinterpret_cast<const char*>(buf.data()), buf.size());
}

}  // namespace

const char* operatorStateModeName(OperatorStateMode mode) {
  switch (mode) {
    case OperatorStateMode::kSplitDistribute: return "list";
    case OperatorStateMode::kUnion: return "union list";
    case OperatorStateMode::kBroadcast: return "broadcast";
  }
  return "unknown";
}

std::string OperatorStateBackend::Meta::describe() const {
  std::string out = std::string(operatorStateModeName(mode)) + " state '" + name + "' of " + schema;
  if (mode == OperatorStateMode::kBroadcast) out += " -> " + valueSchema;
  return out;
}

OperatorStateBackend::OperatorStateBackend(std::string operatorName)
    : operatorName_(std::move(operatorName)) {}

OperatorStateBackend::~OperatorStateBackend() = default;

void OperatorStateBackend::failTtl(const std::string& name) const {
  throw SluiceException("operator '" + operatorName_ + "': state '" + name +
                        "': time-to-live applies to keyed state only, not to operator state");
}

OperatorStateBackend::Entry* OperatorStateBackend::findRegistered(const std::string& name,
                                                                  const std::type_info& type,
                                                                  OperatorStateMode mode) {
  auto it = states_.find(name);
  if (it == states_.end() || !it->second.typed || it->second.meta.mode != mode ||
      *it->second.type != type) {
    return nullptr;
  }
  return &it->second;
}

OperatorStateBackend::Entry& OperatorStateBackend::entryFor(const Meta& meta,
                                                            const std::type_info& type) {
  auto it = states_.find(meta.name);
  if (it == states_.end()) {
    Entry e;
    e.meta = meta;
    return states_.emplace(meta.name, std::move(e)).first->second;
  }
  Entry& e = it->second;
  if (e.typed) {
    if (!(e.meta == meta)) {
      throw SluiceException("operator '" + operatorName_ + "': " + e.meta.describe() +
                            " is already registered; the name cannot also be used for " +
                            meta.describe());
    }
    if (*e.type != type) {
      throw SluiceException("operator '" + operatorName_ + "': " + e.meta.describe() +
                            " is already registered with another C++ type of the same schema");
    }
    return e;
  }
  if (!(e.meta == meta)) {
    throw StateMigrationException("operator '" + operatorName_ + "': the restored " +
                                  e.meta.describe() + " cannot be read as " + meta.describe() +
                                  " (written as " + e.meta.describe() + ", registered as " +
                                  meta.describe() + ")");
  }
  return e;
}

void OperatorStateBackend::loadRestored(Entry& e) {
  if (e.restoredCount == 0 && e.restoredElements.empty()) return;
  DataInputView in(reinterpret_cast<const uint8_t*>(e.restoredElements.data()),
                   e.restoredElements.size());
  try {
    e.typed->readElements(in, e.restoredCount);
    if (in.remaining() != 0) {
      in.failAt(in.position(), std::to_string(in.remaining()) + " bytes left over");
    }
  } catch (const SerializationError& err) {
    throw SerializationError("operator '" + operatorName_ + "': restoring " + e.meta.describe() +
                             ": " + err.what());
  }
  e.restoredCount = 0;
  e.restoredElements.clear();
  e.restoredElements.shrink_to_fit();
}

std::vector<std::string> OperatorStateBackend::getRegisteredStateNames() const {
  std::vector<std::string> names;
  for (const auto& [name, e] : states_) {
    if (e.typed && e.meta.mode != OperatorStateMode::kBroadcast) names.push_back(name);
  }
  return names;
}

std::vector<std::string> OperatorStateBackend::getRegisteredBroadcastStateNames() const {
  std::vector<std::string> names;
  for (const auto& [name, e] : states_) {
    if (e.typed && e.meta.mode == OperatorStateMode::kBroadcast) names.push_back(name);
  }
  return names;
}

std::string OperatorStateBackend::snapshot() const {
  if (states_.empty()) return {};
  std::vector<uint8_t> buf;
  DataOutputView out(buf);
  writeHeader(out, states_.size());
  std::vector<uint8_t> elements;
  for (const auto& [name, e] : states_) {
    if (e.typed) {
      elements.clear();
      DataOutputView elementsOut(elements);
      const uint64_t count = e.typed->writeElements(elementsOut);
      writeState(out, name, e.meta.mode, e.meta.schema, e.meta.valueSchema, count,
                 std::string_view(reinterpret_cast<const char*>(elements.data()), elements.size()));
    } else {
      writeState(out, name, e.meta.mode, e.meta.schema, e.meta.valueSchema, e.restoredCount,
                 e.restoredElements);
    }
  }
  return toString(buf);
}

void OperatorStateBackend::restore(const std::string& bytes) {
  if (restoreCalled_) {
    throw SluiceException("operator '" + operatorName_ +
                          "': operator state can be restored only once");
  }
  if (!states_.empty()) {
    throw SluiceException("operator '" + operatorName_ +
                          "': operator state must be restored before any state is registered");
  }
  restoreCalled_ = true;
  std::vector<ParsedState> parsed =
      parseSnapshot(bytes, "operator state snapshot of operator '" + operatorName_ + "'");
  for (ParsedState& s : parsed) {
    Entry e;
    e.meta = Meta{s.name, s.mode, std::move(s.schema), std::move(s.valueSchema)};
    e.restoredCount = s.count;
    e.restoredElements = std::string(s.elements);
    states_.emplace(s.name, std::move(e));
  }
  restoredAny_ = !states_.empty();
}

std::vector<std::string> OperatorStateBackend::repartition(
    const std::vector<std::string>& oldSubtaskSnapshots, int newParallelism) {
  if (newParallelism < 1) {
    throw SluiceException(
        "operator state repartition: the new parallelism must be at least 1, got " +
        std::to_string(newParallelism));
  }
  const size_t oldCount = oldSubtaskSnapshots.size();
  const size_t newCount = static_cast<size_t>(newParallelism);

  std::vector<std::vector<ParsedState>> parsed(oldCount);
  for (size_t i = 0; i < oldCount; ++i) {
    parsed[i] = parseSnapshot(oldSubtaskSnapshots[i],
                              "operator state snapshot of old subtask " + std::to_string(i));
  }

  // Per state name: where it was first seen, and each old subtask's part.
  struct Collected {
    const ParsedState* first = nullptr;
    size_t firstSubtask = 0;
    std::vector<const ParsedState*> bySubtask;
  };
  std::map<std::string, Collected> byName;
  for (size_t i = 0; i < oldCount; ++i) {
    for (const ParsedState& s : parsed[i]) {
      Collected& c = byName[s.name];
      if (c.first == nullptr) {
        c.first = &s;
        c.firstSubtask = i;
        c.bySubtask.assign(oldCount, nullptr);
      } else if (c.first->mode != s.mode || c.first->schema != s.schema ||
                 c.first->valueSchema != s.valueSchema) {
        throw SluiceException("operator state repartition: state '" + escapeForMessage(s.name) +
                              "' is " + modeAndSchema(*c.first) + " in old subtask " +
                              std::to_string(c.firstSubtask) + " but " + modeAndSchema(s) +
                              " in old subtask " + std::to_string(i));
      }
      c.bySubtask[i] = &s;
    }
  }

  std::vector<std::string> result(newCount);
  if (byName.empty()) return result;

  std::vector<std::vector<uint8_t>> bufs(newCount);
  std::vector<DataOutputView> outs;
  outs.reserve(newCount);
  for (size_t j = 0; j < newCount; ++j) {
    outs.emplace_back(bufs[j]);
    writeHeader(outs[j], byName.size());
  }

  std::string chunk;
  for (const auto& [name, c] : byName) {
    const ParsedState& meta = *c.first;
    auto emit = [&](size_t j, uint64_t count, std::string_view elements) {
      writeState(outs[j], name, meta.mode, meta.schema, meta.valueSchema, count, elements);
    };
    switch (meta.mode) {
      case OperatorStateMode::kBroadcast: {
        for (size_t j = 0; j < newCount; ++j) {
          const ParsedState* src = c.bySubtask[j % oldCount];
          if (src == nullptr) src = c.first;
          emit(j, src->count, src->elements);
        }
        break;
      }
      case OperatorStateMode::kSplitDistribute:
      case OperatorStateMode::kUnion: {
        // The concatenation of all old lists, in subtask order.
        std::vector<std::string_view> all;
        for (const ParsedState* s : c.bySubtask) {
          if (s != nullptr) all.insert(all.end(), s->split.begin(), s->split.end());
        }
        auto emitRange = [&](size_t j, size_t begin, size_t end) {
          chunk.clear();
          for (size_t k = begin; k < end; ++k) chunk.append(all[k]);
          emit(j, end - begin, chunk);
        };
        if (meta.mode == OperatorStateMode::kUnion) {
          for (size_t j = 0; j < newCount; ++j) emitRange(j, 0, all.size());
        } else if (newCount == oldCount) {
          // Unchanged parallelism: every subtask keeps its own list.
          for (size_t j = 0; j < newCount; ++j) {
            const ParsedState* s = c.bySubtask[j];
            if (s != nullptr) {
              emit(j, s->count, s->elements);
            } else {
              emit(j, 0, {});
            }
          }
        } else {
          const size_t base = all.size() / newCount;
          const size_t larger = all.size() % newCount;
          size_t begin = 0;
          for (size_t j = 0; j < newCount; ++j) {
            const size_t size = base + (j < larger ? 1 : 0);
            emitRange(j, begin, begin + size);
            begin += size;
          }
        }
        break;
      }
    }
  }
  for (size_t j = 0; j < newCount; ++j) result[j] = toString(bufs[j]);
  return result;
}

}  // namespace sluice
