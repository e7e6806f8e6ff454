// Compiled into every job library (sluice_add_job): the C entry points a
// cluster process looks up with dlsym. The job's own main() is compiled as
// sluice_job_main (-Dmain=sluice_job_main) and must take (int, char**).
#include <sluice/core/build_fingerprint.h>

int sluice_job_main(int argc, char** argv);

extern "C" {
__attribute__((visibility("default"))) const char* sluice_job_fingerprint() {
  return SLUICE_BUILD_FINGERPRINT;
}
__attribute__((visibility("default"))) int sluice_job_entry(int argc, char** argv) {
  return sluice_job_main(argc, argv);
}
}
