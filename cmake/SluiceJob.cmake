# sluice_add_job(<name> <sources>...)
#
# Builds a job's sources twice:
#   <name>       an executable: embedded mode (env.execute() runs the job in
#                the process), and execution.target: remote submits it;
#   <name>_job   the job library lib<name>.so for `sluice run`: the same
#                sources with main renamed behind the entry point the cluster
#                calls, linked against no engine code (the `sluice` process
#                that loads it provides the engine).
# Compile definitions meant for both go on both targets.
set(SLUICE_JOB_ENTRY_SOURCE ${CMAKE_CURRENT_LIST_DIR}/sluice_job_entry.cc)
set(SLUICE_JOB_CLIENT_SOURCE ${CMAKE_CURRENT_LIST_DIR}/../src/cluster/job_client.cc)

function(sluice_add_job name)
  set(sources ${ARGN})
  add_executable(${name} ${sources} ${SLUICE_JOB_CLIENT_SOURCE})
  set_source_files_properties(${SLUICE_JOB_CLIENT_SOURCE} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  target_link_libraries(${name} PRIVATE sluice sluice_cluster)
  target_compile_definitions(${name} PRIVATE SLUICE_JOB_LIBRARY="$<TARGET_FILE:${name}_job>")
  set_source_files_properties(${SLUICE_JOB_ENTRY_SOURCE} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  add_library(${name}_job MODULE ${sources} ${SLUICE_JOB_ENTRY_SOURCE})
  set_target_properties(${name}_job PROPERTIES OUTPUT_NAME ${name} PREFIX lib)
  target_compile_definitions(${name}_job PRIVATE main=sluice_job_main)
  target_include_directories(${name}_job PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name}_job PRIVATE fmt::fmt Threads::Threads)
  add_dependencies(${name} ${name}_job)
endfunction()
