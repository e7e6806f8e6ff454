// Mailbox: other threads post actions, the task thread runs them between
// elements. Every mail runs exactly once, on the thread that calls runAll(),
// in the order each posting thread posted them; hasMail() tells the task
// whether to look; post() wakes a task sleeping on its TaskWaker.
#include "runtime/mailbox.h"

#include <atomic>
#include <chrono>
#include <latch>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/task_waker.h"

namespace mailbox_test {
namespace {

using namespace sluice::runtime;
using Clock = std::chrono::steady_clock;

TEST(MailboxTest, HasMailFollowsPostRunAllAndClear) {
  TaskWaker waker;
  Mailbox mailbox(waker);
  EXPECT_FALSE(mailbox.hasMail());
  mailbox.runAll();  // nothing to run
  EXPECT_FALSE(mailbox.hasMail());

  std::vector<int> ran;
  mailbox.post([&] { ran.push_back(1); });
  mailbox.post([&] { ran.push_back(2); });
  EXPECT_TRUE(mailbox.hasMail());
  EXPECT_TRUE(ran.empty()) << "post() never runs the mail itself";
  mailbox.runAll();
  EXPECT_FALSE(mailbox.hasMail());
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));

  mailbox.post([&] { ran.push_back(3); });
  EXPECT_TRUE(mailbox.hasMail());
  mailbox.clear();
  EXPECT_FALSE(mailbox.hasMail());
  mailbox.runAll();
  EXPECT_EQ(ran, (std::vector<int>{1, 2})) << "a cleared mail never runs";
}

TEST(MailboxTest, MailPostedByAMailRunsInTheSameRunAll) {
  TaskWaker waker;
  Mailbox mailbox(waker);
  std::vector<int> ran;
  mailbox.post([&] {
    ran.push_back(1);
    mailbox.post([&] {
      ran.push_back(3);
      mailbox.post([&] { ran.push_back(4); });
    });
  });
  mailbox.post([&] { ran.push_back(2); });
  mailbox.runAll();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_FALSE(mailbox.hasMail());
}

TEST(MailboxTest, PostWakesATaskSleepingOnTheWaker) {
  TaskWaker waker;
  Mailbox mailbox(waker);
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  std::latch waiting(1);
  std::atomic<bool> wokeInTime{false};
  std::atomic<bool> sawMail{false};
  std::thread task([&] {
    waiting.count_down();
    waker.waitUntil(deadline);
    wokeInTime.store(Clock::now() < deadline);
    sawMail.store(mailbox.hasMail());
  });
  waiting.wait();
  mailbox.post([] {});
  task.join();
  EXPECT_TRUE(wokeInTime.load()) << "post() did not wake the task";
  EXPECT_TRUE(sawMail.load());
}

TEST(MailboxTest, MailsFromManyThreadsAllRunInPerThreadOrderOnTheTaskThread) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  TaskWaker waker;
  Mailbox mailbox(waker);
  const std::thread::id taskThread = std::this_thread::get_id();
  // Touched only by mails, i.e. only by this thread: no lock needed.
  std::vector<std::vector<int>> seen(kThreads);
  int ran = 0;
  int onOtherThread = 0;

  std::latch go(kThreads + 1);
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t) {
    posters.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < kPerThread; ++i) {
        mailbox.post([&, t, i] {
          if (std::this_thread::get_id() != taskThread) ++onOtherThread;
          seen[t].push_back(i);
          ++ran;
        });
      }
    });
  }
  go.arrive_and_wait();
  // The task loop: run mail when there is some, else sleep until woken.
  const auto giveUp = Clock::now() + std::chrono::seconds(120);
  int rounds = 0;
  while (ran < kThreads * kPerThread && Clock::now() < giveUp) {
    if (mailbox.hasMail()) {
      mailbox.runAll();
      ++rounds;
    } else {
      waker.waitUntil(Clock::now() + std::chrono::seconds(1));
    }
  }
  for (auto& p : posters) p.join();
  mailbox.runAll();

  EXPECT_EQ(ran, kThreads * kPerThread);
  EXPECT_EQ(onOtherThread, 0);
  EXPECT_GE(rounds, 1);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<size_t>(kPerThread)) << "thread " << t;
    for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(seen[t][i], i) << "thread " << t;
  }
  EXPECT_FALSE(mailbox.hasMail());
}

TEST(TaskWakerTest, WakeBeforeWaitIsNotLost) {
  TaskWaker waker;
  waker.wake();
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  waker.waitUntil(deadline);
  EXPECT_LT(Clock::now(), deadline);
}

TEST(TaskWakerTest, PastDeadlineReturnsWithoutAWake) {
  TaskWaker waker;
  waker.waitUntil(Clock::now() - std::chrono::seconds(1));
  SUCCEED();
}

}  // namespace
}  // namespace mailbox_test
