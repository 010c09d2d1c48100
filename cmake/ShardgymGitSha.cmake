# Run at build time (experiments/CMakeLists.txt, target shardgym_git_sha): writes OUT with
#   #define SHARDGYM_GIT_SHA "<12-digit commit of SOURCE_DIR's HEAD>"   ("unknown" outside git)
# and rewrites it only when the commit changed, so a build at the same commit recompiles
# nothing and a build after a commit names that commit in `--version` and in traces.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY "${SOURCE_DIR}"
  OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR sha STREQUAL "")
  set(sha "unknown")
endif()
set(text "#define SHARDGYM_GIT_SHA \"${sha}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
