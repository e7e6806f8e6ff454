// dataplane-bench: payload throughput of the data plane on loopback.
//
// Two DataPlanes in one process (a producer and a consumer TaskManager); one
// producer thread pushes 32 KiB buffers round robin over 1 and over 4
// channels for a fixed time, as a RecordWriter does; one consumer thread takes
// them from the InputGate and recycles them, as a task does. Prints the
// payload rate and the process's CPU time (both io threads included), so the
// cost per byte can be compared across changes.
//
//   dataplane-bench [seconds per run, default 2] [segment size, default 32768]
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cluster/network/data_plane.h"
#include "runtime/buffer_pool.h"
#include "runtime/input_gate.h"
#include "runtime/task_waker.h"

namespace {

using namespace sluice;
using Clock = std::chrono::steady_clock;

double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

void run(int channels, double seconds, size_t segment, int attempt) {
  cluster::DataPlaneOptions o;
  o.segmentSize = segment;
  cluster::DataPlane producerSide(o);
  cluster::DataPlane consumerSide(o);
  runtime::TaskWaker waker;
  runtime::InputGate gate(channels, waker);
  std::vector<cluster::DataPlane::RemoteInput> inputs;
  std::vector<runtime::BufferSink*> sinks;
  for (int c = 0; c < channels; ++c) {
    cluster::ChannelKey key{"bench", attempt, 0, 0, c};
    inputs.push_back({key, "127.0.0.1", producerSide.port(), c});
    sinks.push_back(producerSide.producerChannel(key));
  }
  consumerSide.consumeRemote(inputs, gate);

  // The producer's pool: a few buffers per channel, as a RecordWriter has.
  runtime::BufferPool pool(segment, 4 * channels + 8);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> received{0};
  std::thread consumer([&] {
    int ch = 0;
    runtime::Buffer b;
    uint64_t bytes = 0;
    for (;;) {
      if (gate.poll(ch, b)) {
        bytes += b.size;
        b.pool->recycle(b.data);
        continue;
      }
      if (stop.load(std::memory_order_relaxed)) break;
      waker.waitUntil(Clock::now() + std::chrono::milliseconds(1));
    }
    received = bytes;
  });

  double cpu0 = cpuSeconds();
  auto t0 = Clock::now();
  auto end =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  uint64_t sent = 0;
  int c = 0;
  while (Clock::now() < end) {
    for (int i = 0; i < 64; ++i) {
      uint8_t* seg = pool.request();
      std::memset(seg, static_cast<int>(sent), 64);  // touch it, as a serializer would
      sinks[static_cast<size_t>(c)]->push(
          c, runtime::Buffer{seg, static_cast<uint32_t>(segment), &pool});
      sent += segment;
      c = (c + 1) % channels;
    }
  }
  // The consumer stops at the first empty poll from now on: the few buffers
  // still on their way are not counted.
  stop = true;
  consumer.join();
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = cpuSeconds() - cpu0;
  double gb = static_cast<double>(received.load()) / 1e9;
  std::printf(
      "channels=%d segment=%zu payload=%.2f GB in %.2f s: %.2f GB/s, cpu %.2f s (%.2f GB per "
      "cpu-second)\n",
      channels, segment, gb, wall, gb / wall, cpu, gb / cpu);
  std::fflush(stdout);
  consumerSide.releaseAttempt("bench", attempt);
  producerSide.releaseAttempt("bench", attempt);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  size_t segment = argc > 2 ? static_cast<size_t>(std::atol(argv[2])) : 32 * 1024;
  run(1, seconds, segment, 1);
  run(4, seconds, segment, 2);
  return 0;
}
