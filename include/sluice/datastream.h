// DataStream<T>: a stream of T and the transformations on it, named as in
// Flink's DataStream API.
//
// A DataStream is a cheap handle into the job being built by its
// StreamExecutionEnvironment: each transformation appends an operator to the
// job's graph and returns a handle to its output. Nothing runs until
// execute(). Every method validates its arguments when called and throws
// SluiceException with a message naming the problem, so a wrong job fails
// before it starts.
//
// User functions are lambdas or objects of the interfaces in functions.h. A
// callable of the wrong signature fails to compile with one static_assert
// that lists the accepted forms.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/core/config.h>
#include <sluice/core/key_hash.h>
#include <sluice/fields.h>
#include <sluice/functions.h>
#include <sluice/graph/stream_graph.h>
#include <sluice/internal/operators.h>
#include <sluice/sink.h>
#include <sluice/sinks.h>
#include <sluice/watermarks.h>

namespace sluice {

namespace internal {

// What every DataStream of one environment shares: the graph being built and
// the settings it is built with.
struct EnvironmentState {
  StreamGraph graph;
  Configuration config;
  int parallelism = 1;
  int maxParallelism = kDefaultMaxParallelism;
  int64_t bufferTimeoutMs = 100;
  bool chainingEnabled = true;
  // Processing time of every operator; null means the system clock.
  std::shared_ptr<const Clock> clock;
};

// One upstream of an operator input: a node's main output or a side output,
// with the partitioning chosen for the connection.
struct Upstream {
  int node = -1;
  std::string sideTag;
  PartitionKind partition = PartitionKind::kDefault;
  std::shared_ptr<const NetworkOutputFactory> network;
};

template <class F>
inline constexpr bool kAlwaysFalse = false;

// Two-input operations (`what`: "connect", "join", "union", ...) take streams
// of one environment only.
inline void requireSameEnvironment(const char* what, const EnvironmentState* a,
                                   const EnvironmentState* b) {
  if (a != b) {
    throw SluiceException(std::string(what) +
                          ": the streams belong to different execution environments");
  }
}

// Sets a node's uid; uids are unique within a job.
inline void setUid(StreamGraph& graph, int node, const std::string& id) {
  if (id.empty()) throw SluiceException("uid must not be empty");
  for (const auto& n : graph.nodes()) {
    if (n.id != node && n.uid == id) {
      throw SluiceException("uid '" + id + "' is used by two operators ('" + n.name + "' and '" +
                            graph.node(node).name + "'); uids must be unique within a job");
    }
  }
  graph.node(node).uid = id;
}

}  // namespace internal

// The forms each transformation accepts.
template <class F, class T>
concept MapCallable =
    std::invocable<F&, const T&> && !std::is_void_v<std::invoke_result_t<F&, const T&>>;
template <class F, class T>
concept MapFunctionObject = requires {
  typename F::OutputType;
}
&&std::derived_from<F, MapFunction<T, typename F::OutputType>>;

template <class F, class T>
concept FilterCallable = std::is_invocable_r_v<bool, F&, const T&>;
template <class F, class T>
concept FilterFunctionObject = std::derived_from<F, FilterFunction<T>>;

template <class F, class T>
concept ReduceCallable = std::is_invocable_r_v<T, F&, const T&, const T&>;
template <class F, class T>
concept ReduceFunctionObject = std::derived_from<F, ReduceFunction<T>>;

template <class F, class T>
concept KeySelectorCallable =
    std::invocable<F&, const T&> && !std::is_void_v<std::invoke_result_t<F&, const T&>>;

// flatMap's output type: the OUT of a Collector<OUT>& parameter.
namespace internal {
template <class F, class T, class = void>
struct FlatMapOut {
  using type = void;
};
template <class C>
struct CollectorArg;
template <class O>
struct CollectorArg<Collector<O>&> {
  using type = O;
};
// The second parameter type of a two-argument callable (lambda, functor or
// function pointer); void when F is not one.
template <class F, class = void>
struct SecondArg {
  using type = void;
};
template <class R, class A, class B>
struct SecondArg<R (*)(A, B)> {
  using type = B;
};
template <class M>
struct MemberSecondArg {
  using type = void;
};
template <class C, class R, class A, class B>
struct MemberSecondArg<R (C::*)(A, B) const> {
  using type = B;
};
template <class C, class R, class A, class B>
struct MemberSecondArg<R (C::*)(A, B)> {
  using type = B;
};
template <class F>
struct SecondArg<F, std::void_t<decltype(&F::operator())>> {
  using type = typename MemberSecondArg<decltype(&F::operator())>::type;
};
template <class F, class T>
struct FlatMapOut<F, T, std::void_t<typename CollectorArg<typename SecondArg<F>::type>::type>> {
  using type = typename CollectorArg<typename SecondArg<F>::type>::type;
};
}  // namespace internal

template <class F, class T>
concept FlatMapCallable =
    !std::is_void_v<typename internal::FlatMapOut<F, T>::type> &&
    std::invocable<F&, const T&, Collector<typename internal::FlatMapOut<F, T>::type>&>;
template <class F, class T>
concept FlatMapFunctionObject = requires {
  typename F::OutputType;
}
&&std::derived_from<F, FlatMapFunction<T, typename F::OutputType>>;

template <class T>
class DataStream;
template <class T>
class SingleOutputStreamOperator;
template <class T>
class DataStreamSink;
template <class T, class K, class KeySelector>
class KeyedStream;
template <class T1, class T2>
class ConnectedStreams;
template <class T>
class BroadcastStream;
template <class IN1, class IN2>
class BroadcastConnectedStream;
template <class IN1, class KS, class KeySelector, class IN2>
class KeyedBroadcastConnectedStream;
template <class T1, class T2, class K, class KS1, class KS2>
class KeyedConnectedStreams;

namespace internal {
// Wires every upstream of `stream` into input `inputIndex` of `node`.
template <class X>
void connectInput(const DataStream<X>& stream, int node, int inputIndex);
// Adds a node with two inputs, `first` into input 0 and `second` into input
// 1, each keeping the partitioning its stream has. `what` names the
// operation in the error when the streams belong to different environments.
template <class OUT, class IN1, class IN2, class Make>
SingleOutputStreamOperator<OUT> addTwoInputOperator(const char* what, const DataStream<IN1>& first,
                                                    const DataStream<IN2>& second, std::string name,
                                                    Make make);
}  // namespace internal

template <class T>
class DataStream {
  static_assert(Serializable<T>,
                "DataStream<T>: T has no sluice::TypeSerializer: declare a struct with "
                "SLUICE_STRUCT(Type, field1, field2, ...), use a supported type (numbers, "
                "std::string, pair, tuple, vector, optional, map, ...), or specialize "
                "sluice::TypeSerializer<T>");

 public:
  using ValueType = T;

  DataStream(std::shared_ptr<internal::EnvironmentState> env,
             std::vector<internal::Upstream> inputs)
      : env_(std::move(env)), inputs_(std::move(inputs)) {}

  // --- one-to-one transformations ------------------------------------------

  // f: OUT(const T&), or a MapFunction<T, OUT> / RichMapFunction<T, OUT>.
  template <class F>
  auto map(F f) {
    if constexpr (MapCallable<F, T>) {
      using OUT = std::decay_t<std::invoke_result_t<F&, const T&>>;
      return addOperator<OUT>(
          "Map", [f] { return internal::makeOwned<internal::MapOperator<T, OUT, F>>(f); });
    } else if constexpr (MapFunctionObject<F, T>) {
      using OUT = typename F::OutputType;
      return addOperator<OUT>(
          "Map", [f] { return internal::makeOwned<internal::MapOperator<T, OUT, F>>(f); });
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "DataStream<T>::map(f) accepts:\n"
                    "  - a callable  OUT f(const T&)  (OUT not void)\n"
                    "  - an object of a class derived from sluice::MapFunction<T, OUT> or "
                    "sluice::RichMapFunction<T, OUT>");
      return *this;
    }
  }

  // f: void(const T&, Collector<OUT>&), or a FlatMapFunction<T, OUT>.
  template <class F>
  auto flatMap(F f) {
    if constexpr (FlatMapFunctionObject<F, T>) {
      using OUT = typename F::OutputType;
      return addOperator<OUT>(
          "Flat Map", [f] { return internal::makeOwned<internal::FlatMapOperator<T, OUT, F>>(f); });
    } else if constexpr (FlatMapCallable<F, T>) {
      using OUT = typename internal::FlatMapOut<F, T>::type;
      return addOperator<OUT>(
          "Flat Map", [f] { return internal::makeOwned<internal::FlatMapOperator<T, OUT, F>>(f); });
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "DataStream<T>::flatMap(f) accepts:\n"
                    "  - a callable  void f(const T&, sluice::Collector<OUT>&)  (a lambda with "
                    "that exact parameter list; not a generic lambda)\n"
                    "  - an object of a class derived from sluice::FlatMapFunction<T, OUT> or "
                    "sluice::RichFlatMapFunction<T, OUT>");
      return *this;
    }
  }

  // f: bool(const T&), or a FilterFunction<T>.
  template <class F>
  auto filter(F f) {
    if constexpr (FilterCallable<F, T> || FilterFunctionObject<F, T>) {
      return addOperator<T>("Filter",
                            [f] { return internal::makeOwned<internal::FilterOperator<T, F>>(f); });
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "DataStream<T>::filter(f) accepts:\n"
                    "  - a callable  bool f(const T&)\n"
                    "  - an object of a class derived from sluice::FilterFunction<T> or "
                    "sluice::RichFilterFunction<T>");
      return *this;
    }
  }

  // A ProcessFunction<T, OUT> subclass object.
  template <class F>
  auto process(F f) {
    if constexpr (requires { typename F::OutputType; } &&
                  std::derived_from<F, ProcessFunction<T, typename F::OutputType>>) {
      using OUT = typename F::OutputType;
      return addOperator<OUT>(
          "Process", [f] { return internal::makeOwned<internal::ProcessOperator<T, OUT, F>>(f); });
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "DataStream<T>::process(f) accepts an object of a class derived from "
                    "sluice::ProcessFunction<T, OUT>");
      return *this;
    }
  }

  // --- keying ----------------------------------------------------------------

  // key: K(const T&). The key's hash (Java-compatible, see key_hash.h) picks
  // its key group, so equal keys always meet in the same subtask.
  template <class F>
  auto keyBy(F key) const {
    if constexpr (KeySelectorCallable<F, T>) {
      using K = std::decay_t<std::invoke_result_t<F&, const T&>>;
      return KeyedStream<T, K, F>(env_, inputs_, std::move(key));
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "DataStream<T>::keyBy(key) accepts a callable  K key(const T&)  (K not void) "
                    "or a member pointer  &T::field;  use keyBy<N>() for a tuple position");
      return *this;
    }
  }
  template <class V, class C>
  requires std::same_as<C, T>
  auto keyBy(V C::*member) const {
    return keyBy([member](const T& v) -> const V& { return v.*member; });
  }
  // Key by the field at compile-time position N of a pair, tuple or
  // SLUICE_STRUCT (Flink's keyBy(0)).
  template <size_t N>
  auto keyBy() const {
    static_assert(internal::Fields<T>::kHasFields && N < internal::Fields<T>::kCount,
                  "keyBy<N>(): N must be a field position of T (a pair, tuple or SLUICE_STRUCT)");
    return keyBy([](const T& v) -> const auto& { return internal::Fields<T>::template get<N>(v); });
  }

  // --- partitioning ----------------------------------------------------------

  DataStream<T> rebalance() const { return partitioned(PartitionKind::kRebalance); }
  DataStream<T> rescale() const { return partitioned(PartitionKind::kRescale); }
  DataStream<T> shuffle() const { return partitioned(PartitionKind::kShuffle); }
  DataStream<T> broadcast() const { return partitioned(PartitionKind::kBroadcast); }
  DataStream<T> forward() const { return partitioned(PartitionKind::kForward); }
  DataStream<T> global() const { return partitioned(PartitionKind::kGlobal); }
  // partitioner: a Partitioner<K> object; key: K(const T&).
  template <class P, class F>
  DataStream<T> partitionCustom(P partitioner, F key) const {
    static_assert(KeySelectorCallable<F, T>,
                  "partitionCustom(partitioner, key): key must be K(const T&)");
    using K = std::decay_t<std::invoke_result_t<F&, const T&>>;
    static_assert(std::derived_from<P, Partitioner<K>>,
                  "partitionCustom(partitioner, key): partitioner must derive from "
                  "sluice::Partitioner<K> where K is the key type");
    static_assert(std::is_copy_constructible_v<P>,
                  "partitionCustom: the partitioner must be copyable (each subtask gets a copy)");
    std::shared_ptr<const NetworkOutputFactory> network =
        internal::makeOwned<internal::CustomNetworkFactory<T, K, P, F>>(std::move(partitioner),
                                                                        std::move(key));
    return withPartition(PartitionKind::kCustom, network);
  }

  // --- custom operators ------------------------------------------------------------

  // Appends an operator built by `make()` (a std::unique_ptr to a
  // StreamOperatorBase with one input of T and output OUT), fed by this
  // stream with its partitioning. Flink's DataStream.transform.
  template <class OUT, class Make>
  SingleOutputStreamOperator<OUT> transform(std::string name, Make make) const {
    return addOperator<OUT>(std::move(name), std::move(make));
  }

  // --- event time -------------------------------------------------------------

  // Gives every record a timestamp (the strategy's assigner, or the one it
  // has) and replaces upstream watermarks with the strategy's. See
  // sluice/watermarks.h.
  SingleOutputStreamOperator<T> assignTimestampsAndWatermarks(
      const WatermarkStrategy<T>& strategy) const {
    return addOperator<T>("Timestamps/Watermarks", [strategy] {
      return internal::makeOwned<internal::TimestampsAndWatermarksOperator<T>>(strategy);
    });
  }

  // --- windows (defined in windowed_stream.h) --------------------------------

  // All elements in windows of one operator instance (parallelism 1).
  template <class A>
  auto windowAll(A assigner) const;
  // Windows of `size` elements (and every `slide` elements), non-keyed.
  auto countWindowAll(int64_t size) const;
  auto countWindowAll(int64_t size, int64_t slide) const;

  // --- combining --------------------------------------------------------------

  // Merges streams of the same type; no de-duplication, no order across them.
  template <class... More>
  DataStream<T> union_(const More&... others) const {
    std::vector<internal::Upstream> all = inputs_;
    (checkAndAppend(all, others), ...);
    return DataStream<T>(env_, std::move(all));
  }
  // Flink's name; `union` is a C++ keyword, so it is spelled unionWith too.
  template <class... More>
  DataStream<T> unionWith(const More&... others) const {
    return union_(others...);
  }

  template <class T2>
  ConnectedStreams<T, T2> connect(const DataStream<T2>& other) const {
    return ConnectedStreams<T, T2>(*this, other);
  }

  // --- window joins (defined in joins.h) ---------------------------------------

  // join(other).where(key1).equalTo(key2).window(assigner).apply(f): every
  // pair of elements with equal keys in the same window.
  template <class T2>
  auto join(const DataStream<T2>& other) const;
  // coGroup(other).where(key1).equalTo(key2).window(assigner).apply(f): both
  // sides' elements of each key and window, together.
  template <class T2>
  auto coGroup(const DataStream<T2>& other) const;

  // --- sinks ------------------------------------------------------------------

  DataStreamSink<T> print(const std::string& sinkIdentifier = "") const {
    return sinkTo(PrintSink<T>(false, sinkIdentifier), "Print to Std. Out");
  }
  DataStreamSink<T> printToErr(const std::string& sinkIdentifier = "") const {
    return sinkTo(PrintSink<T>(true, sinkIdentifier), "Print to Std. Err");
  }
  DataStreamSink<T> writeAsText(const std::string& path,
                                WriteMode mode = WriteMode::kNoOverwrite) const {
    return sinkTo(TextFileSink<T>(path, mode), "Text File Sink");
  }
  DataStreamSink<T> writeAsCsv(const std::string& path, WriteMode mode = WriteMode::kNoOverwrite,
                               const std::string& rowDelimiter = "\n",
                               const std::string& fieldDelimiter = ",") const {
    return sinkTo(CsvFileSink<T>(path, mode, rowDelimiter, fieldDelimiter), "CsvSink");
  }
  template <class S>
  requires std::derived_from<S, Sink<T>> DataStreamSink<T> sinkTo(S sink,
                                                                  const std::string& name = "Sink")
  const {
    auto shared = std::make_shared<const S>(std::move(sink));
    return sinkTo(std::shared_ptr<const Sink<T>>(shared), name);
  }
  DataStreamSink<T> sinkTo(std::shared_ptr<const Sink<T>> sink,
                           const std::string& name = "Sink") const;

  // Runs the job built so far (plus a collecting sink) and returns every
  // element this stream produced, in no particular order across subtasks.
  // For bounded jobs and tests.
  std::vector<T> executeAndCollect(const std::string& jobName = "");

  // --- access for the API and tests --------------------------------------------

  const std::vector<internal::Upstream>& inputs() const { return inputs_; }
  const std::shared_ptr<internal::EnvironmentState>& environmentState() const { return env_; }

 protected:
  template <class OUT, class Make>
  SingleOutputStreamOperator<OUT> addOperator(std::string name, Make make) const {
    auto& g = env_->graph;
    int node = g.addNode(std::move(name), internal::makeOperatorFactory<OUT>(std::move(make)));
    connectInputs(node, 0);
    return SingleOutputStreamOperator<OUT>(env_, node);
  }

  void connectInputs(int node, int inputIndex) const {
    internal::connectInput(*this, node, inputIndex);
  }

  DataStream<T> partitioned(PartitionKind kind) const { return withPartition(kind, nullptr); }
  DataStream<T> withPartition(PartitionKind kind,
                              std::shared_ptr<const NetworkOutputFactory> network) const {
    std::vector<internal::Upstream> ins = inputs_;
    for (auto& u : ins) {
      u.partition = kind;
      u.network = network;
    }
    return DataStream<T>(env_, std::move(ins));
  }

  template <class Other>
  void checkAndAppend(std::vector<internal::Upstream>& all, const Other& other) const {
    static_assert(std::is_base_of_v<DataStream<T>, Other>,
                  "union: every stream must have the same element type T");
    internal::requireSameEnvironment("union", other.environmentState().get(), env_.get());
    for (const auto& u : other.inputs()) all.push_back(u);
  }

  std::shared_ptr<internal::EnvironmentState> env_;
  std::vector<internal::Upstream> inputs_;

 public:
  // --- broadcast state (defined in broadcast.h) -------------------------------

  // This stream, sent to every subtask of the operator it is connected to,
  // declaring the broadcast states (one MapStateDescriptor each).
  template <class D, class... More>
  BroadcastStream<T> broadcast(const D& descriptor, const More&... more) const;
  template <class T2>
  BroadcastConnectedStream<T, T2> connect(const BroadcastStream<T2>& broadcast) const;
};

// The output of one operator: lets the operator be configured.
template <class T>
class SingleOutputStreamOperator : public DataStream<T> {
 public:
  SingleOutputStreamOperator(std::shared_ptr<internal::EnvironmentState> env, int node)
      : DataStream<T>(std::move(env),
                      {internal::Upstream{node, "", PartitionKind::kDefault, nullptr}}),
        node_(node) {}

  SingleOutputStreamOperator& name(const std::string& n) {
    node().name = n;
    return *this;
  }
  // A stable id for the operator's state across job versions.
  SingleOutputStreamOperator& uid(const std::string& id) {
    internal::setUid(this->env_->graph, node_, id);
    return *this;
  }
  SingleOutputStreamOperator& setParallelism(int p) {
    if (p < 1) {
      throw SluiceException("operator '" + node().name + "': parallelism must be at least 1, got " +
                            std::to_string(p));
    }
    node().parallelism = p;
    return *this;
  }
  SingleOutputStreamOperator& setMaxParallelism(int p) {
    if (p < 1 || p > kUpperBoundMaxParallelism) {
      throw SluiceException("operator '" + node().name +
                            "': max parallelism must be in [1, 32768], got " + std::to_string(p));
    }
    node().maxParallelism = p;
    return *this;
  }
  SingleOutputStreamOperator& slotSharingGroup(const std::string& group) {
    node().slotSharingGroup = group;
    return *this;
  }
  SingleOutputStreamOperator& disableChaining() {
    node().chaining = ChainingStrategy::kNever;
    return *this;
  }
  SingleOutputStreamOperator& startNewChain() {
    node().chaining = ChainingStrategy::kHead;
    return *this;
  }

  // The records this operator emitted to `tag` (ProcessFunction ctx.output).
  template <class X>
  DataStream<X> getSideOutput(const OutputTag<X>& tag) const {
    return DataStream<X>(
        this->env_, {internal::Upstream{node_, tag.getId(), PartitionKind::kDefault, nullptr}});
  }

  int getId() const { return node_; }

 private:
  StreamNode& node() const { return this->env_->graph.node(node_); }
  int node_;
};

namespace internal {

template <class X>
void connectInput(const DataStream<X>& stream, int node, int inputIndex) {
  for (const auto& in : stream.inputs()) {
    auto network =
        in.network
            ? in.network
            : std::shared_ptr<const NetworkOutputFactory>(makeOwned<PlainNetworkFactory<X>>());
    stream.environmentState()->graph.addEdge(in.node, node, inputIndex, in.sideTag, in.partition,
                                             TypedOps<X>::instance(), std::move(network));
  }
}

template <class OUT, class IN1, class IN2, class Make>
SingleOutputStreamOperator<OUT> addTwoInputOperator(const char* what, const DataStream<IN1>& first,
                                                    const DataStream<IN2>& second, std::string name,
                                                    Make make) {
  const auto& env = first.environmentState();
  requireSameEnvironment(what, env.get(), second.environmentState().get());
  const int node = env->graph.addNode(std::move(name), makeOperatorFactory<OUT>(std::move(make)));
  connectInput(first, node, 0);
  connectInput(second, node, 1);
  return SingleOutputStreamOperator<OUT>(env, node);
}

}  // namespace internal

template <class T>
class DataStreamSink {
 public:
  DataStreamSink(std::shared_ptr<internal::EnvironmentState> env, int node)
      : env_(std::move(env)), node_(node) {}
  DataStreamSink& name(const std::string& n) {
    env_->graph.node(node_).name = n;
    return *this;
  }
  DataStreamSink& uid(const std::string& id) {
    internal::setUid(env_->graph, node_, id);
    return *this;
  }
  DataStreamSink& setParallelism(int p) {
    if (p < 1)
      throw SluiceException("sink parallelism must be at least 1, got " + std::to_string(p));
    env_->graph.node(node_).parallelism = p;
    return *this;
  }
  DataStreamSink& disableChaining() {
    env_->graph.node(node_).chaining = ChainingStrategy::kNever;
    return *this;
  }
  DataStreamSink& slotSharingGroup(const std::string& group) {
    env_->graph.node(node_).slotSharingGroup = group;
    return *this;
  }
  int getId() const { return node_; }

 private:
  std::shared_ptr<internal::EnvironmentState> env_;
  int node_;
};

template <class T>
DataStreamSink<T> DataStream<T>::sinkTo(std::shared_ptr<const Sink<T>> sink,
                                        const std::string& name) const {
  if (!sink) throw SluiceException("sinkTo: the sink is null");
  auto& g = env_->graph;
  int node = g.addNode(name, internal::makeOperatorFactory<T>([sink] {
                         return internal::makeOwned<internal::SinkOperator<T>>(sink);
                       }));
  connectInputs(node, 0);
  return DataStreamSink<T>(env_, node);
}

// A stream partitioned by key. Aggregations keep one running value per key and
// emit the updated value for every element, as in Flink.
template <class T, class K, class KeySelector = std::function<K(const T&)>>
class KeyedStream : public DataStream<T> {
 public:
  using KeyType = K;

  KeyedStream(std::shared_ptr<internal::EnvironmentState> env,
              std::vector<internal::Upstream> inputs, KeySelector key)
      : DataStream<T>(std::move(env), keyed(inputs, key)), key_(std::move(key)) {}

  // Converts from a keyed stream with a lambda key selector, so users may
  // name the type as KeyedStream<T, K>.
  template <class Other>
  requires(!std::same_as<Other, KeySelector>)
      KeyedStream(const KeyedStream<T, K, Other>& other)  // NOLINT: implicit by design
      : DataStream<T>(other.environmentState(), other.inputs()), key_(other.getKeySelector()) {}

  const KeySelector& getKeySelector() const { return key_; }

  // f: T(const T& accumulated, const T& next), or a ReduceFunction<T>.
  template <class F>
  SingleOutputStreamOperator<T> reduce(F f) const {
    if constexpr (ReduceCallable<F, T> || ReduceFunctionObject<F, T>) {
      auto key = key_;
      return this->template addOperator<T>("Keyed Reduce", [f, key] {
        return internal::makeOwned<internal::KeyedReduceOperator<T, K, F, KeySelector>>(f, key);
      });
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "KeyedStream<T, K>::reduce(f) accepts:\n"
                    "  - a callable  T f(const T& accumulated, const T& next)\n"
                    "  - an object of a class derived from sluice::ReduceFunction<T>");
      return SingleOutputStreamOperator<T>(this->env_, -1);
    }
  }

  // Field aggregations by position (tuples, pairs, SLUICE_STRUCTs, numbers),
  // by field name (SLUICE_STRUCTs) or by member pointer.
  SingleOutputStreamOperator<T> sum(int position) const {
    return aggregate(internal::AggregationKind::kSum, position);
  }
  SingleOutputStreamOperator<T> min(int position) const {
    return aggregate(internal::AggregationKind::kMin, position);
  }
  SingleOutputStreamOperator<T> max(int position) const {
    return aggregate(internal::AggregationKind::kMax, position);
  }
  SingleOutputStreamOperator<T> minBy(int position) const {
    return aggregate(internal::AggregationKind::kMinBy, position);
  }
  SingleOutputStreamOperator<T> maxBy(int position) const {
    return aggregate(internal::AggregationKind::kMaxBy, position);
  }
  SingleOutputStreamOperator<T> sum(const std::string& field) const {
    return aggregate(internal::AggregationKind::kSum, fieldPosition(field));
  }
  SingleOutputStreamOperator<T> min(const std::string& field) const {
    return aggregate(internal::AggregationKind::kMin, fieldPosition(field));
  }
  SingleOutputStreamOperator<T> max(const std::string& field) const {
    return aggregate(internal::AggregationKind::kMax, fieldPosition(field));
  }
  SingleOutputStreamOperator<T> minBy(const std::string& field) const {
    return aggregate(internal::AggregationKind::kMinBy, fieldPosition(field));
  }
  SingleOutputStreamOperator<T> maxBy(const std::string& field) const {
    return aggregate(internal::AggregationKind::kMaxBy, fieldPosition(field));
  }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> sum(V C::*m)
  const { return aggregateMember(internal::AggregationKind::kSum, m); }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> min(V C::*m)
  const { return aggregateMember(internal::AggregationKind::kMin, m); }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> max(V C::*m)
  const { return aggregateMember(internal::AggregationKind::kMax, m); }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> minBy(V C::*m)
  const { return aggregateMember(internal::AggregationKind::kMinBy, m); }
  template <class V, class C>
  requires std::same_as<C, T> SingleOutputStreamOperator<T> maxBy(V C::*m)
  const { return aggregateMember(internal::AggregationKind::kMaxBy, m); }

  // Windows per key (defined in windowed_stream.h): window(assigner), and
  // count windows that fire on every size-th element of a key (sliding by
  // `slide` elements).
  template <class A>
  auto window(A assigner) const;
  auto countWindow(int64_t size) const;
  auto countWindow(int64_t size, int64_t slide) const;

  // intervalJoin(other).between(lower, upper).process(f) (defined in
  // joins.h): joins each element at time t with the elements of `other` with
  // the same key in [t + lower, t + upper]. Both streams need the same key type.
  template <class T2, class K2, class KS2>
  auto intervalJoin(const KeyedStream<T2, K2, KS2>& other) const;

  // A KeyedProcessFunction<K, T, OUT> subclass object.
  template <class F>
  auto process(F f) const {
    if constexpr (requires { typename F::OutputType; } &&
                  std::derived_from<F, KeyedProcessFunction<K, T, typename F::OutputType>>) {
      using OUT = typename F::OutputType;
      auto key = key_;
      return this->template addOperator<OUT>("KeyedProcess", [f, key] {
        return internal::makeOwned<internal::KeyedProcessOperator<K, T, OUT, F, KeySelector>>(f,
                                                                                              key);
      });
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "KeyedStream<T, K>::process(f) accepts an object of a class derived from "
                    "sluice::KeyedProcessFunction<K, T, OUT> (K the key type, T the element type)");
      return *this;
    }
  }

 private:
  static std::vector<internal::Upstream> keyed(std::vector<internal::Upstream> inputs,
                                               const KeySelector& key) {
    std::shared_ptr<const NetworkOutputFactory> network =
        internal::makeOwned<internal::KeyedNetworkFactory<T, KeySelector>>(key);
    for (auto& u : inputs) {
      u.partition = PartitionKind::kHash;
      u.network = network;
    }
    return inputs;
  }

  int fieldPosition(const std::string& field) const {
    if constexpr (SluiceStruct<T>) {
      int32_t i = fieldIndex<T>(field);
      if (i < 0) {
        throw SluiceException("no field '" + field + "' in " + TypeSerializer<T>::schema());
      }
      return i;
    } else {
      throw SluiceException("aggregation by field name '" + field +
                            "' needs a SLUICE_STRUCT type; got " + TypeSerializer<T>::schema());
    }
  }

  SingleOutputStreamOperator<T> aggregate(internal::AggregationKind kind, int position) const {
    internal::PositionAggregator<T> agg(
        kind, position, std::string("KeyedStream::") + internal::aggregationName(kind));
    return reduceWithName(std::move(agg), "Keyed Aggregation");
  }
  template <class V, class C>
  SingleOutputStreamOperator<T> aggregateMember(internal::AggregationKind kind, V C::*m) const {
    return reduceWithName(internal::MemberAggregator<T, V, C>(kind, m), "Keyed Aggregation");
  }
  template <class F>
  SingleOutputStreamOperator<T> reduceWithName(F f, const char* name) const {
    auto key = key_;
    return this->template addOperator<T>(name, [f, key] {
      return internal::makeOwned<internal::KeyedReduceOperator<T, K, F, KeySelector>>(f, key);
    });
  }

  KeySelector key_;

 public:
  // Broadcast state (defined in broadcast.h): connect(BroadcastStream) gives
  // a keyed broadcast connected stream; connect(DataStream) is unchanged.
  using DataStream<T>::connect;
  template <class T2>
  KeyedBroadcastConnectedStream<T, K, KeySelector, T2> connect(
      const BroadcastStream<T2>& broadcast) const;
  // Two keyed streams with the same key type: process(KeyedCoProcessFunction),
  // or map / flatMap with keyed state.
  template <class T2, class K2, class KS2>
  auto connect(const KeyedStream<T2, K2, KS2>& other) const;
};

// Two streams of possibly different types, processed by one operator with a
// function per input (map1/map2, flatMap1/flatMap2, processElement1/2).
template <class T1, class T2>
class ConnectedStreams {
 public:
  ConnectedStreams(DataStream<T1> first, DataStream<T2> second)
      : first_(std::move(first)), second_(std::move(second)) {
    internal::requireSameEnvironment("connect", first_.environmentState().get(),
                                     second_.environmentState().get());
  }

  template <class F>
  auto map(F f) const {
    static_assert(
        requires { typename F::OutputType; } &&
            std::derived_from<F, CoMapFunction<T1, T2, typename F::OutputType>>,
        "ConnectedStreams<T1, T2>::map(f) accepts an object of a class derived from "
        "sluice::CoMapFunction<T1, T2, OUT>");
    using OUT = typename F::OutputType;
    return add<OUT>(
        "Co-Map", [f] { return internal::makeOwned<internal::CoMapOperator<T1, T2, OUT, F>>(f); });
  }
  template <class F>
  auto flatMap(F f) const {
    static_assert(
        requires { typename F::OutputType; } &&
            std::derived_from<F, CoFlatMapFunction<T1, T2, typename F::OutputType>>,
        "ConnectedStreams<T1, T2>::flatMap(f) accepts an object of a class derived from "
        "sluice::CoFlatMapFunction<T1, T2, OUT>");
    using OUT = typename F::OutputType;
    return add<OUT>("Co-Flat Map", [f] {
      return internal::makeOwned<internal::CoFlatMapOperator<T1, T2, OUT, F>>(f);
    });
  }
  template <class F>
  auto process(F f) const {
    static_assert(
        requires { typename F::OutputType; } &&
            std::derived_from<F, CoProcessFunction<T1, T2, typename F::OutputType>>,
        "ConnectedStreams<T1, T2>::process(f) accepts an object of a class derived from "
        "sluice::CoProcessFunction<T1, T2, OUT>; a KeyedCoProcessFunction needs keyed inputs: "
        "connect two KeyedStreams, or call keyBy(key1, key2) first");
    using OUT = typename F::OutputType;
    return add<OUT>("Co-Process", [f] {
      return internal::makeOwned<internal::CoProcessOperator<T1, T2, OUT, F>>(f);
    });
  }

  // Keys both inputs (Flink's connect(...).keyBy(key1, key2)): key1 and
  // key2 are K(const T1&) and K(const T2&) with the same K.
  template <class KS1, class KS2>
  auto keyBy(KS1 key1, KS2 key2) const;

  const DataStream<T1>& getFirstInput() const { return first_; }
  const DataStream<T2>& getSecondInput() const { return second_; }

 private:
  template <class, class, class, class, class>
  friend class KeyedConnectedStreams;

  template <class OUT, class Make>
  SingleOutputStreamOperator<OUT> add(std::string name, Make make) const {
    return internal::addTwoInputOperator<OUT>("connect", first_, second_, std::move(name),
                                              std::move(make));
  }

  DataStream<T1> first_;
  DataStream<T2> second_;
};

// Two keyed streams with the same key type K, connected: equal keys of both
// meet in one subtask, where the function sees that key's state and timers.
// Made by keyedA.connect(keyedB) or a.connect(b).keyBy(key1, key2).
template <class T1, class T2, class K, class KS1, class KS2>
class KeyedConnectedStreams {
 public:
  KeyedConnectedStreams(KeyedStream<T1, K, KS1> first, KeyedStream<T2, K, KS2> second)
      : first_(std::move(first)), second_(std::move(second)) {}

  // f: an object of a class derived from KeyedCoProcessFunction<K, T1, T2, OUT>
  // (or a CoProcessFunction<T1, T2, OUT>).
  template <class F>
  auto process(F f) const {
    if constexpr (requires { typename F::OutputType; } &&
                  std::derived_from<F, KeyedCoProcessFunction<K, T1, T2, typename F::OutputType>>) {
      return add<F>("KeyedCoProcess", std::move(f));
    } else if constexpr (requires { typename F::OutputType; } &&
                         std::derived_from<F, CoProcessFunction<T1, T2, typename F::OutputType>>) {
      // A plain CoProcessFunction on keyed inputs, as Flink allows: no keyed
      // state or timers.
      return ConnectedStreams<T1, T2>(first_, second_).process(std::move(f));
    } else {
      static_assert(internal::kAlwaysFalse<F>,
                    "keyed ConnectedStreams<T1, T2>::process(f) accepts an object of a class "
                    "derived from sluice::KeyedCoProcessFunction<K, T1, T2, OUT> (K the key "
                    "type of both keyBy selectors) or sluice::CoProcessFunction<T1, T2, OUT>");
      return 0;
    }
  }
  // f: a CoMapFunction<T1, T2, OUT> (a RichCoMapFunction may use keyed state).
  template <class F>
  auto map(F f) const {
    static_assert(
        requires { typename F::OutputType; } &&
            std::derived_from<F, CoMapFunction<T1, T2, typename F::OutputType>>,
        "keyed ConnectedStreams<T1, T2>::map(f) accepts an object of a class derived from "
        "sluice::CoMapFunction<T1, T2, OUT>");
    return add<F>("Co-Map", std::move(f));
  }
  // f: a CoFlatMapFunction<T1, T2, OUT> (a RichCoFlatMapFunction may use
  // keyed state).
  template <class F>
  auto flatMap(F f) const {
    static_assert(
        requires { typename F::OutputType; } &&
            std::derived_from<F, CoFlatMapFunction<T1, T2, typename F::OutputType>>,
        "keyed ConnectedStreams<T1, T2>::flatMap(f) accepts an object of a class derived from "
        "sluice::CoFlatMapFunction<T1, T2, OUT>");
    return add<F>("Co-Flat Map", std::move(f));
  }

  const KeyedStream<T1, K, KS1>& getFirstInput() const { return first_; }
  const KeyedStream<T2, K, KS2>& getSecondInput() const { return second_; }

 private:
  template <class F>
  SingleOutputStreamOperator<typename F::OutputType> add(std::string name, F f) const {
    using OUT = typename F::OutputType;
    using Op = internal::KeyedCoProcessOperator<K, T1, T2, OUT, F, KS1, KS2>;
    KS1 key1 = first_.getKeySelector();
    KS2 key2 = second_.getKeySelector();
    return ConnectedStreams<T1, T2>(first_, second_)
        .template add<OUT>(std::move(name),
                           [f, key1, key2] { return internal::makeOwned<Op>(f, key1, key2); });
  }

  KeyedStream<T1, K, KS1> first_;
  KeyedStream<T2, K, KS2> second_;
};

template <class T, class K, class KeySelector>
template <class T2, class K2, class KS2>
auto KeyedStream<T, K, KeySelector>::connect(const KeyedStream<T2, K2, KS2>& other) const {
  static_assert(std::is_same_v<K, K2>,
                "connect: both keyed streams must have the same key type (keyBy selectors "
                "returning the same type)");
  if constexpr (std::is_same_v<K, K2>) {
    internal::requireSameEnvironment("connect", this->environmentState().get(),
                                     other.environmentState().get());
    return KeyedConnectedStreams<T, T2, K, KeySelector, KS2>(*this, other);
  } else {
    return 0;
  }
}

template <class T1, class T2>
template <class KS1, class KS2>
auto ConnectedStreams<T1, T2>::keyBy(KS1 key1, KS2 key2) const {
  auto first = first_.keyBy(std::move(key1));
  auto second = second_.keyBy(std::move(key2));
  return first.connect(second);
}

}  // namespace sluice
