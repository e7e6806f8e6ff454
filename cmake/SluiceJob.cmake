# sluice_add_job(<name> <sources>...)
#
# Compiles a job's sources once, with main renamed to sluice_job_main
# (-Dmain=sluice_job_main), into the object library <name>_objects, and links
# those objects twice:
#   <name>       an executable: embedded mode (env.execute() runs the job in
#                the process), and execution.target: remote submits it; its
#                main() (sluice_job_main.cc) calls the job's;
#   <name>_job   the job library lib<name>.so for `sluice run`: the entry
#                points the cluster calls (sluice_job_entry.cc), linked
#                against no engine code (the `sluice` process that loads it
#                provides the engine).
# Compile definitions for the job's sources go on <name>_objects.
set(SLUICE_JOB_ENTRY_SOURCE ${CMAKE_CURRENT_LIST_DIR}/sluice_job_entry.cc)
set(SLUICE_JOB_MAIN_SOURCE ${CMAKE_CURRENT_LIST_DIR}/sluice_job_main.cc)
set(SLUICE_JOB_CLIENT_SOURCE ${CMAKE_CURRENT_LIST_DIR}/../src/cluster/job_client.cc)

function(sluice_add_job name)
  set(sources ${ARGN})
  add_library(${name}_objects OBJECT ${sources})
  set_target_properties(${name}_objects PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_definitions(${name}_objects PRIVATE main=sluice_job_main)
  # The engine's headers and their usage requirements, for compiling only:
  # objects taken with $<TARGET_OBJECTS> carry no link dependencies.
  target_link_libraries(${name}_objects PRIVATE sluice)

  add_executable(${name} $<TARGET_OBJECTS:${name}_objects> ${SLUICE_JOB_MAIN_SOURCE}
    ${SLUICE_JOB_CLIENT_SOURCE})
  set_source_files_properties(${SLUICE_JOB_CLIENT_SOURCE} ${SLUICE_JOB_MAIN_SOURCE}
    PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  target_link_libraries(${name} PRIVATE sluice sluice_cluster)
  target_compile_definitions(${name} PRIVATE SLUICE_JOB_LIBRARY="$<TARGET_FILE:${name}_job>")

  set_source_files_properties(${SLUICE_JOB_ENTRY_SOURCE} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  add_library(${name}_job MODULE $<TARGET_OBJECTS:${name}_objects> ${SLUICE_JOB_ENTRY_SOURCE})
  set_target_properties(${name}_job PROPERTIES OUTPUT_NAME ${name} PREFIX lib)
  target_include_directories(${name}_job PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name}_job PRIVATE fmt::fmt Threads::Threads)
  add_dependencies(${name} ${name}_job)
endfunction()
