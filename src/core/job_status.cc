#include <sluice/core/job_status.h>

namespace sluice {

const char* jobStatusName(JobStatus status) {
  switch (status) {
    case JobStatus::kCreated: return "CREATED";
    case JobStatus::kRunning: return "RUNNING";
    case JobStatus::kFinished: return "FINISHED";
    case JobStatus::kCanceled: return "CANCELED";
    case JobStatus::kFailed: return "FAILED";
  }
  return "UNKNOWN";
}

}  // namespace sluice
