// The two-phase-commit protocol of TwoPhaseCommitSink, driven through the
// sink operator with the operator harness: an in-memory transactional store
// stands for the external system. Each test computes the committed output it
// expects from the elements it wrote and the checkpoints that completed, and
// checks that every transaction was committed exactly once (commits of a
// committed transaction are counted separately: they must be no-ops).
//
// Also: plain sinks through the changed SinkOperator (writer created before
// open, flushed before snapshots, state carried on) and the processing-time
// clock and timers a WriterInitContext gives.
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sluice/internal/operators.h>
#include <sluice/sinks.h>
#include <sluice/testing.h>
#include <sluice/two_phase_commit.h>

namespace sluice {

struct MemTxn {
  int64_t id = 0;
  std::vector<int64_t> values;
};
SLUICE_STRUCT(MemTxn, id, values)

namespace two_phase_commit_test {
namespace {

using testing::CapturedSnapshot;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::OperatorHarness;
using testing::redistribute;

// The external system: transactions are pre-committed (made durable) under
// their id, committed ones become visible in commit order.
struct Store {
  int64_t nextId = 1;
  std::map<int64_t, std::vector<int64_t>> preCommitted;
  std::vector<int64_t> visible;    // committed values, in commit order
  std::map<int64_t, int> commits;  // effective commits per transaction
  int redundantCommits = 0;        // commits of an already committed one
  std::set<int64_t> aborted;
  std::vector<std::string> log;  // recover* calls, in order
  int failNextCommits = 0;       // commits that throw before doing anything
};

class MemSink final : public TwoPhaseCommitSink<int64_t, MemTxn> {
 public:
  explicit MemSink(std::shared_ptr<Store> store) : store_(std::move(store)) {}

 protected:
  std::unique_ptr<TwoPhaseCommitSink> clone() const override {
    return std::make_unique<MemSink>(*this);
  }
  void open(WriterInitContext& context) override {
    store_->log.push_back("open " + std::to_string(context.getSubtaskId()));
  }
  MemTxn beginTransaction() override { return MemTxn{store_->nextId++, {}}; }
  void invoke(MemTxn& txn, const int64_t& value, const SinkWriterContext&) override {
    txn.values.push_back(value);
  }
  void preCommit(MemTxn& txn) override { store_->preCommitted[txn.id] = txn.values; }
  void commit(const MemTxn& txn) override {
    if (store_->failNextCommits > 0) {
      --store_->failNextCommits;
      throw std::runtime_error("commit failed");
    }
    if (store_->commits.count(txn.id) != 0) {
      ++store_->redundantCommits;
      return;
    }
    auto it = store_->preCommitted.find(txn.id);
    ASSERT_NE(it, store_->preCommitted.end())
        << "commit of transaction " << txn.id << " that was never pre-committed";
    ASSERT_EQ(it->second, txn.values) << "checkpointed transaction differs";
    store_->visible.insert(store_->visible.end(), txn.values.begin(), txn.values.end());
    store_->commits[txn.id] = 1;
  }
  void abort(const MemTxn& txn) override {
    ASSERT_EQ(store_->commits.count(txn.id), 0u) << "abort of committed " << txn.id;
    store_->aborted.insert(txn.id);
  }
  void recoverAndCommit(const MemTxn& txn) override {
    store_->log.push_back("recoverAndCommit " + std::to_string(txn.id));
    commit(txn);
  }
  void recoverAndAbort(const MemTxn& txn) override {
    store_->log.push_back("recoverAndAbort " + std::to_string(txn.id));
    abort(txn);
  }

 private:
  std::shared_ptr<Store> store_;
};

std::unique_ptr<StreamOperatorBase> memSinkOperator(const std::shared_ptr<Store>& store) {
  return std::make_unique<internal::SinkOperator<int64_t>>(std::make_shared<const MemSink>(store));
}

std::vector<int64_t> range(int64_t from, int64_t to) {  // [from, to)
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

void writeAll(OperatorHarness<int64_t>& h, const std::vector<int64_t>& values) {
  for (int64_t v : values) h.processElement(0, v);
}

void expectEachCommittedOnce(const Store& store) {
  for (const auto& [id, n] : store.commits) EXPECT_EQ(n, 1) << "transaction " << id;
}

TEST(TwoPhaseCommitSinkTest, NothingVisibleBeforeTheCheckpointCompletes) {
  auto store = std::make_shared<Store>();
  OperatorHarness<int64_t> h(memSinkOperator(store));
  h.open();
  writeAll(h, range(0, 5));
  EXPECT_TRUE(store->visible.empty());
  h.snapshot(1);
  writeAll(h, range(5, 8));
  EXPECT_TRUE(store->visible.empty()) << "pre-committed is not committed";
  h.notifyCheckpointComplete(1);
  EXPECT_EQ(store->visible, range(0, 5)) << "exactly the elements before barrier 1";
  h.snapshot(2);
  h.notifyCheckpointComplete(2);
  EXPECT_EQ(store->visible, range(0, 8));
  expectEachCommittedOnce(*store);
  EXPECT_EQ(store->redundantCommits, 0);
}

TEST(TwoPhaseCommitSinkTest, ALaterCompletionCommitsEveryEarlierCheckpointInOrder) {
  auto store = std::make_shared<Store>();
  OperatorHarness<int64_t> h(memSinkOperator(store));
  h.open();
  writeAll(h, {1, 2});
  h.snapshot(1);
  writeAll(h, {3});
  h.snapshot(2);
  writeAll(h, {4, 5});
  h.snapshot(3);
  writeAll(h, {6});
  h.notifyCheckpointComplete(2);  // 1 is subsumed
  EXPECT_THAT(store->visible, ElementsAre(1, 2, 3));
  h.notifyCheckpointComplete(2);  // repeated: nothing new
  h.notifyCheckpointComplete(3);
  EXPECT_THAT(store->visible, ElementsAre(1, 2, 3, 4, 5));
  expectEachCommittedOnce(*store);
}

TEST(TwoPhaseCommitSinkTest, CrashAfterSnapshotThenRestoreCommitsItOnceAndAbortsTheRest) {
  auto store = std::make_shared<Store>();
  CapturedSnapshot snap;
  int64_t inFlight = 0;
  {
    OperatorHarness<int64_t> h(memSinkOperator(store));
    h.open();
    writeAll(h, range(0, 10));
    snap = h.snapshot(7);
    writeAll(h, range(10, 15));  // after barrier 7: replayed after the restore
    inFlight = store->nextId - 1;
    h.crash();  // no notifyCheckpointComplete(7), no close()
  }
  EXPECT_TRUE(store->visible.empty());
  EXPECT_TRUE(store->aborted.empty()) << "a crash aborts nothing by itself";

  OperatorHarness<int64_t> restored(memSinkOperator(store));
  std::vector<OperatorStateRestore> restores = redistribute({snap}, 1);
  restored.open(&restores[0]);
  // Checkpoint 7 completed (restores use completed checkpoints only).
  EXPECT_EQ(store->visible, range(0, 10));
  EXPECT_TRUE(store->aborted.count(inFlight)) << "the transaction open at the crash";
  // The source replays from checkpoint 7.
  writeAll(restored, range(10, 15));
  restored.snapshot(8);
  restored.notifyCheckpointComplete(8);
  EXPECT_EQ(store->visible, range(0, 15));
  expectEachCommittedOnce(*store);
  EXPECT_EQ(store->redundantCommits, 0);
}

TEST(TwoPhaseCommitSinkTest, CommitIsRepeatedOnRestoreWhenTheCrashFollowedTheCommit) {
  auto store = std::make_shared<Store>();
  CapturedSnapshot snap;
  {
    OperatorHarness<int64_t> h(memSinkOperator(store));
    h.open();
    writeAll(h, {4, 5, 6});
    snap = h.snapshot(1);
    h.notifyCheckpointComplete(1);
    h.crash();
  }
  EXPECT_THAT(store->visible, ElementsAre(4, 5, 6));
  OperatorHarness<int64_t> restored(memSinkOperator(store));
  auto restores = redistribute({snap}, 1);
  restored.open(&restores[0]);
  // recoverAndCommit ran for the committed transaction: an idempotent no-op.
  EXPECT_EQ(store->redundantCommits, 1);
  EXPECT_THAT(store->visible, ElementsAre(4, 5, 6));
  expectEachCommittedOnce(*store);
}

TEST(TwoPhaseCommitSinkTest, RestoreFromAnOlderSnapshotNeverCommitsALaterOne) {
  auto store = std::make_shared<Store>();
  CapturedSnapshot first;
  {
    OperatorHarness<int64_t> h(memSinkOperator(store));
    h.open();
    writeAll(h, {1, 2});
    first = h.snapshot(1);
    writeAll(h, {3, 4});
    h.snapshot(2);  // never completes
    writeAll(h, {5});
    h.crash();
  }
  OperatorHarness<int64_t> restored(memSinkOperator(store));
  auto restores = redistribute({first}, 1);
  restored.open(&restores[0]);
  EXPECT_THAT(store->visible, ElementsAre(1, 2));
  // The transaction of checkpoint 2 was the one open at checkpoint 1.
  EXPECT_THAT(store->log,
              ElementsAre("open 0", "open 0", "recoverAndCommit 1", "recoverAndAbort 2"));
  restored.snapshot(3);
  restored.notifyCheckpointComplete(3);
  EXPECT_THAT(store->visible, ElementsAre(1, 2)) << "3, 4 and 5 were never replayed here";
}

TEST(TwoPhaseCommitSinkTest, CloseWithoutFinishAbortsTheOpenTransactionOnly) {
  auto store = std::make_shared<Store>();
  OperatorHarness<int64_t> h(memSinkOperator(store));
  h.open();
  writeAll(h, {1});
  h.snapshot(1);  // transaction 1 pending
  writeAll(h, {2});
  h.close();  // a failure elsewhere: close without finish
  EXPECT_THAT(store->aborted, ElementsAre(2));
  EXPECT_TRUE(store->visible.empty()) << "pending stays pending for a restore";
}

TEST(TwoPhaseCommitSinkTest, EndOfInputCommitsPendingAndLastTransaction) {
  auto store = std::make_shared<Store>();
  OperatorHarness<int64_t> h(memSinkOperator(store));
  h.open();
  writeAll(h, range(0, 3));
  h.snapshot(1);
  writeAll(h, range(3, 6));
  h.snapshot(2);
  writeAll(h, range(6, 9));
  h.finish();
  EXPECT_EQ(store->visible, range(0, 9));
  h.close();
  EXPECT_TRUE(store->aborted.empty());
  expectEachCommittedOnce(*store);
}

TEST(TwoPhaseCommitSinkTest, AFailedCommitStaysPendingAndIsRetried) {
  auto store = std::make_shared<Store>();
  OperatorHarness<int64_t> h(memSinkOperator(store));
  h.open();
  writeAll(h, {1, 2});
  h.snapshot(1);
  store->failNextCommits = 1;
  EXPECT_THROW(h.notifyCheckpointComplete(1), std::runtime_error);
  EXPECT_TRUE(store->visible.empty());
  writeAll(h, {3});
  h.snapshot(2);
  h.notifyCheckpointComplete(2);
  EXPECT_THAT(store->visible, ElementsAre(1, 2, 3));
  expectEachCommittedOnce(*store);
}

// Runs `inputs.size()` subtasks, each writing inputs[i][0] before barrier 1
// and inputs[i][1] before barrier 2 and inputs[i][2] after it; checkpoint 1
// completed and was notified, 2 completed but the notification was lost;
// then every subtask crashes. Restores `newParallelism` subtasks from
// checkpoint 2 and returns the store.
std::shared_ptr<Store> crashAndRescale(const std::vector<std::vector<std::vector<int64_t>>>& inputs,
                                       int newParallelism) {
  auto store = std::make_shared<Store>();
  const int oldParallelism = static_cast<int>(inputs.size());
  std::vector<CapturedSnapshot> snaps;
  {
    std::vector<std::unique_ptr<OperatorHarness<int64_t>>> hs;
    for (int i = 0; i < oldParallelism; ++i) {
      hs.push_back(
          std::make_unique<OperatorHarness<int64_t>>(memSinkOperator(store), i, oldParallelism));
      hs[i]->open();
    }
    for (int i = 0; i < oldParallelism; ++i) writeAll(*hs[i], inputs[i][0]);
    for (auto& h : hs) h->snapshot(1);
    for (auto& h : hs) h->notifyCheckpointComplete(1);
    for (int i = 0; i < oldParallelism; ++i) writeAll(*hs[i], inputs[i][1]);
    for (auto& h : hs) snaps.push_back(h->snapshot(2));
    for (int i = 0; i < oldParallelism; ++i) writeAll(*hs[i], inputs[i][2]);
    for (auto& h : hs) h->crash();
  }
  auto restores = redistribute(snaps, newParallelism);
  for (int i = 0; i < newParallelism; ++i) {
    OperatorHarness<int64_t> h(memSinkOperator(store), i, newParallelism);
    h.open(&restores[i]);
    h.close();
  }
  return store;
}

int recoveredAborts(const Store& store) {
  int n = 0;
  for (const std::string& e : store.log) n += e.rfind("recoverAndAbort", 0) == 0 ? 1 : 0;
  return n;
}

std::multiset<int64_t> committedBefore2(const std::vector<std::vector<std::vector<int64_t>>>& in) {
  std::multiset<int64_t> out;
  for (const auto& subtask : in) {
    out.insert(subtask[0].begin(), subtask[0].end());
    out.insert(subtask[1].begin(), subtask[1].end());
  }
  return out;
}

TEST(TwoPhaseCommitSinkTest, RescaleTwoToOneCommitsEveryPendingTransactionOnce) {
  const std::vector<std::vector<std::vector<int64_t>>> inputs = {{{1, 2}, {3}, {4}},
                                                                 {{10}, {11, 12}, {13, 14}}};
  auto store = crashAndRescale(inputs, 1);
  const std::multiset<int64_t> visible(store->visible.begin(), store->visible.end());
  EXPECT_EQ(visible, committedBefore2(inputs));
  expectEachCommittedOnce(*store);
  EXPECT_EQ(store->redundantCommits, 0);
  // Both transactions open at checkpoint 2 were aborted by the restore.
  EXPECT_EQ(recoveredAborts(*store), 2);
}

TEST(TwoPhaseCommitSinkTest, RescaleOneToTwoCommitsEveryPendingTransactionOnce) {
  const std::vector<std::vector<std::vector<int64_t>>> inputs = {{{1, 2, 3}, {4, 5}, {6}}};
  auto store = crashAndRescale(inputs, 2);
  const std::multiset<int64_t> visible(store->visible.begin(), store->visible.end());
  EXPECT_EQ(visible, committedBefore2(inputs));
  expectEachCommittedOnce(*store);
  EXPECT_EQ(store->redundantCommits, 0);
  EXPECT_EQ(recoveredAborts(*store), 1);
}

TEST(TwoPhaseCommitSinkTest, RescaleOneToTwoWithTwoPendingSplitsThemOverBothSubtasks) {
  auto store = std::make_shared<Store>();
  CapturedSnapshot snap;
  {
    OperatorHarness<int64_t> h(memSinkOperator(store));
    h.open();
    writeAll(h, {1});
    h.snapshot(1);
    writeAll(h, {2});
    snap = h.snapshot(2);  // neither notified: two pending transactions
    h.crash();
  }
  auto restores = redistribute({snap}, 2);
  std::vector<size_t> recoveredPerSubtask;
  for (int i = 0; i < 2; ++i) {
    const size_t before = store->log.size();
    OperatorHarness<int64_t> h(memSinkOperator(store), i, 2);
    h.open(&restores[i]);
    size_t commits = 0;
    for (size_t k = before; k < store->log.size(); ++k) {
      if (store->log[k].rfind("recoverAndCommit", 0) == 0) ++commits;
    }
    recoveredPerSubtask.push_back(commits);
  }
  EXPECT_THAT(recoveredPerSubtask, ElementsAre(1, 1));
  EXPECT_THAT(store->visible, ::testing::UnorderedElementsAre(1, 2));
  expectEachCommittedOnce(*store);
}

TEST(TwoPhaseCommitSinkTest, EveryCheckpointRestoredAfterEveryStepGivesTheSameOutput) {
  // Straight through vs. crash and restore after every checkpoint: the
  // committed output is the same.
  const std::vector<int64_t> all = range(0, 20);
  auto straight = std::make_shared<Store>();
  {
    OperatorHarness<int64_t> h(memSinkOperator(straight));
    h.open();
    for (int64_t i = 0; i < 20; ++i) {
      h.processElement(0, all[i]);
      if (i % 3 == 2) {
        h.snapshot(i);
        h.notifyCheckpointComplete(i);
      }
    }
    h.finish();
  }
  auto restarted = std::make_shared<Store>();
  std::optional<OperatorStateRestore> restore;
  for (int64_t i = 0; i < 20;) {
    OperatorHarness<int64_t> h(memSinkOperator(restarted));
    h.open(restore ? &*restore : nullptr);
    int64_t j = i;
    for (; j < 20; ++j) {
      h.processElement(0, all[j]);
      if (j % 3 == 2) {
        CapturedSnapshot s = h.snapshot(j);
        h.notifyCheckpointComplete(j);
        restore = redistribute({s}, 1)[0];
        h.processElement<int64_t>(0, -1);  // lost in the crash
        h.crash();
        break;
      }
    }
    if (j >= 20) {
      h.finish();
      break;
    }
    i = j + 1;
  }
  EXPECT_EQ(straight->visible, all);
  EXPECT_EQ(restarted->visible, all);
  expectEachCommittedOnce(*restarted);
}

// --- plain sinks and the writer context through the sink operator --------------------------

TEST(SinkOperatorTest, PlainSinkWorksAndIsFlushedBeforeSnapshots) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  auto sink = std::make_shared<const PrintSink<int64_t>>(PrintSink<int64_t>::toStream(f, "p"));
  OperatorHarness<int64_t> h(std::make_unique<internal::SinkOperator<int64_t>>(sink));
  h.open();
  h.processElement<int64_t>(0, 1);
  h.processElement<int64_t>(0, 2);
  CapturedSnapshot s = h.snapshot(1);
  EXPECT_EQ(s.operatorState, "") << "a plain sink has no state";
  h.finish();
  h.close();
  std::rewind(f);
  char buf[64] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  EXPECT_EQ(std::string(buf, n), "p> 1\np> 2\n");
  std::fclose(f);
}

TEST(SinkOperatorTest, PlainSinkCarriesRestoredStateForward) {
  OperatorStateBackend earlier("op");
  earlier.getListState(ListStateDescriptor<int64_t>("old")).update({1, 2});
  OperatorStateRestore restore;
  restore.operatorState = earlier.snapshot();
  std::FILE* f = std::tmpfile();
  auto sink = std::make_shared<const PrintSink<int64_t>>(PrintSink<int64_t>::toStream(f));
  OperatorHarness<int64_t> h(std::make_unique<internal::SinkOperator<int64_t>>(sink));
  h.open(&restore);
  EXPECT_EQ(h.snapshot(2).operatorState, restore.operatorState);
  h.close();
  std::fclose(f);
}

// A sink whose writer reports what its WriterInitContext offers.
struct ContextProbe {
  std::vector<std::string> events;
};

class ProbeSink final : public Sink<int64_t> {
 public:
  explicit ProbeSink(std::shared_ptr<ContextProbe> probe) : probe_(std::move(probe)) {}
  std::unique_ptr<SinkWriter<int64_t>> createWriter(WriterInitContext& context) const override {
    probe_->events.push_back("create at " + std::to_string(context.clock().currentTimeMillis()));
    auto probe = probe_;
    const bool ok = context.registerProcessingTimer(
        context.clock().currentTimeMillis() + 100,
        [probe](int64_t t) { probe->events.push_back("timer " + std::to_string(t)); });
    probe_->events.push_back(ok ? "timers" : "no timers");
    return std::make_unique<Writer>(probe_, context);
  }

 private:
  class Writer final : public SinkWriter<int64_t> {
   public:
    Writer(std::shared_ptr<ContextProbe> probe, WriterInitContext& context)
        : probe_(std::move(probe)), context_(context) {}
    void write(const int64_t& v, const SinkWriterContext&) override {
      probe_->events.push_back("write " + std::to_string(v) + " at " +
                               std::to_string(context_.clock().currentTimeMillis()));
    }

   private:
    std::shared_ptr<ContextProbe> probe_;
    WriterInitContext& context_;
  };
  std::shared_ptr<ContextProbe> probe_;
};

TEST(SinkOperatorTest, WriterSeesTheOperatorClockAndTimersStopAtClose) {
  auto probe = std::make_shared<ContextProbe>();
  OperatorHarness<int64_t> h(
      std::make_unique<internal::SinkOperator<int64_t>>(std::make_shared<const ProbeSink>(probe)));
  h.context().manualClock().setCurrentTime(5000);
  h.open();
  h.context().setProcessingTime(5050);
  h.processElement<int64_t>(0, 1);
  h.context().setProcessingTime(5100);
  h.processElement<int64_t>(0, 2);
  h.close();
  EXPECT_THAT(probe->events, ElementsAre("create at 5000", "timers", "write 1 at 5050",
                                         "timer 5100", "write 2 at 5100"));
  // A timer due after close does not reach the closed writer.
  auto closedProbe = std::make_shared<ContextProbe>();
  OperatorHarness<int64_t> h2(std::make_unique<internal::SinkOperator<int64_t>>(
      std::make_shared<const ProbeSink>(closedProbe)));
  h2.open();
  h2.close();
  h2.context().setProcessingTime(h2.context().manualClock().currentTimeMillis() + 1000);
  EXPECT_THAT(closedProbe->events, ElementsAre(HasSubstr("create at"), "timers"));
}

TEST(SinkOperatorTest, DefaultWriterInitContextHasTheSystemClockAndNoTimers) {
  class Minimal final : public WriterInitContext {
   public:
    int getSubtaskId() const override { return 0; }
    int getNumberOfParallelSubtasks() const override { return 1; }
    RuntimeContext& getRuntimeContext() override { throw std::logic_error("unused"); }
  } context;
  const int64_t before = SystemClock::instance().currentTimeMillis();
  const int64_t now = context.clock().currentTimeMillis();
  EXPECT_GE(now, before);
  EXPECT_FALSE(context.registerProcessingTimer(now, [](int64_t) {}));
}

}  // namespace
}  // namespace two_phase_commit_test
}  // namespace sluice
