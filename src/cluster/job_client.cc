// Linked into every job executable sluice_add_job() builds: lets execute()
// with execution.target: remote (or -D execution.target=remote) submit the
// job's library, built next to the executable, to a cluster.
//
// glibc calls functions in .init_array with the program's arguments, before
// main(); that is where the arguments come from.
#include <string>
#include <vector>

#include "cluster/client.h"

#ifndef SLUICE_JOB_LIBRARY
#define SLUICE_JOB_LIBRARY ""
#endif

namespace {

void installFromArgs(int argc, char** argv, char**) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  sluice::cluster::installRemoteExecutor(SLUICE_JOB_LIBRARY, std::move(args));
}

__attribute__((section(".init_array"), used)) void (*kInstall)(int, char**,
                                                               char**) = installFromArgs;

}  // namespace
