// The state of a job, as JobClient::getJobStatus() and the runtime report it
// (Flink's JobStatus: the states a job of the embedded engine goes through).
#pragma once

#include <cstdint>

namespace sluice {

enum class JobStatus : uint8_t { kCreated, kRunning, kFinished, kCanceled, kFailed };

// "CREATED", "RUNNING", "FINISHED", "CANCELED", "FAILED" (Flink's names).
const char* jobStatusName(JobStatus status);

inline bool isTerminal(JobStatus status) {
  return status == JobStatus::kFinished || status == JobStatus::kCanceled ||
         status == JobStatus::kFailed;
}

}  // namespace sluice
