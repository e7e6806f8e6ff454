// The web dashboard in a real browser (Debian's Chromium, driven through
// chromedriver): a live embedded job with a slow sink, its job graph with
// records on every vertex, backpressure turning HIGH upstream of the sink,
// the checkpoint list growing; a screenshot goes to the build directory.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <sluice/sluice.h>

#include "harness/webdriver.h"

namespace sluice {
namespace dashboard_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class SlowSink final : public Sink<int64_t> {
 public:
  std::unique_ptr<SinkWriter<int64_t>> createWriter(WriterInitContext&) const override {
    return std::make_unique<Writer>();
  }

 private:
  class Writer final : public SinkWriter<int64_t> {
   public:
    void write(const int64_t&, const SinkWriterContext&) override {
      std::this_thread::sleep_for(milliseconds(1));
    }
  };
};

TEST(DashboardTest, JobGraphBackpressureAndCheckpointsShowInTheBrowser) {
  Configuration c;
  c.set(options::kRestEmbeddedEnabled, true);
  c.set(options::kRestPort, 0);
  c.set(options::kWebRefreshInterval, milliseconds(500));
  c.set(options::kExecutionCheckpointingInterval, milliseconds(300));
  // Small buffers: barriers wait behind fewer records at the slow sink.
  c.set(options::kTaskManagerMemorySegmentSize, MemorySize::ofKibiBytes(1));
  StreamExecutionEnvironment env(c);
  env.setParallelism(1);
  env.fromGenerator([](int64_t i) { return i; }, kUnboundedCount)
      .map([](int64_t x) { return x + 1; })
      .name("Upstream")
      .disableChaining()
      .sinkTo(SlowSink(), "Slow Sink")
      .disableChaining();
  JobClient client = env.executeAsync("dashboard");
  const std::string url = client.getWebInterfaceURL();
  ASSERT_FALSE(url.empty());

  test::WebDriver browser;
  browser.navigate(url + "/#/jobs/" + client.getJobId());

  // Every vertex of the graph, with records read or written.
  browser.waitForScript(
      R"(const boxes = [...document.querySelectorAll('[data-vertex-id]')];
         if (boxes.length !== 3) return false;
         return boxes.every(b => {
           const v = f => Number(b.querySelector('[data-field="' + f + '"]')?.dataset.value || 0);
           return v('read-records') > 0 || v('write-records') > 0;
         });)",
      seconds(60), "three vertices with non-zero records");
  const auto names = browser.executeScript(
      R"(return [...document.querySelectorAll('[data-vertex-id] [data-field="name"]')]
                .map(e => e.textContent);)");
  std::string all = names.dump();
  EXPECT_NE(all.find("Upstream"), std::string::npos) << all;
  EXPECT_NE(all.find("Slow Sink"), std::string::npos) << all;

  // Upstream of the slow sink, backpressure turns HIGH; the sink stays OK.
  browser.waitForScript(
      R"(const box = [...document.querySelectorAll('[data-vertex-id]')]
           .find(b => b.querySelector('[data-field="name"]').textContent.includes('Upstream'));
         return box && box.querySelector('[data-field="backpressure"]').textContent.trim() === 'HIGH';)",
      seconds(60), "backpressure HIGH on the Upstream vertex");
  const auto sinkLevel = browser.executeScript(
      R"(const box = [...document.querySelectorAll('[data-vertex-id]')]
           .find(b => b.querySelector('[data-field="name"]').textContent.includes('Slow Sink'));
         return box.querySelector('[data-field="backpressure"]').textContent.trim();)");
  EXPECT_EQ(sinkLevel, "OK");

  std::filesystem::create_directories(SLUICE_TEST_OUTPUT_DIR);
  browser.screenshot(std::filesystem::path(SLUICE_TEST_OUTPUT_DIR) / "dashboard-job.png");

  // The checkpoint history grows while the page is open.
  browser.click("[data-tab=\"checkpoints\"]");
  const auto first =
      browser.waitForScript("return document.querySelectorAll('[data-checkpoint-id]').length;",
                            seconds(60), "a checkpoint row");
  browser.waitForScript("return document.querySelectorAll('[data-checkpoint-id]').length > " +
                            std::to_string(first.get<int>()) + ";",
                        seconds(60), "more checkpoint rows");
  browser.screenshot(std::filesystem::path(SLUICE_TEST_OUTPUT_DIR) / "dashboard-checkpoints.png");
  EXPECT_GT(std::filesystem::file_size(std::filesystem::path(SLUICE_TEST_OUTPUT_DIR) /
                                       "dashboard-job.png"),
            1000u);

  client.cancel();
  EXPECT_THROW(client.getJobExecutionResult(), JobExecutionException);
}

}  // namespace
}  // namespace dashboard_test
}  // namespace sluice
