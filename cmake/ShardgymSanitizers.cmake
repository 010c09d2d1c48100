# Sanitizer and fuzzing builds (docs/fuzzing.md).
#
#   -DSHARDGYM_SANITIZE=address,undefined   ASan + UBSan on every target (gcc or clang)
#   -DSHARDGYM_SANITIZE=thread              TSan (run the `multirank` tests with
#                                           TSAN_OPTIONS=suppressions=fuzz/tsan.supp)
#   -DSHARDGYM_FUZZ=ON                      clang only: the libFuzzer harnesses of fuzz/, with
#                                           the project's code built with fuzzer-no-link + ASan +
#                                           UBSan (coverage counters and sanitizers everywhere)
#
# These flags are set for the whole directory tree rather than per target: a sanitizer only
# sees what is instrumented, and every object (static libraries, the OBJECT registration
# libraries, tests, executables) must agree, so no target may be left out by accident.
# UBSan findings abort (-fno-sanitize-recover) so that ctest and libFuzzer see them as failures.

set(SHARDGYM_SANITIZE "" CACHE STRING "Sanitizers for the whole tree: address,undefined | thread")
option(SHARDGYM_FUZZ "Build the libFuzzer harnesses in fuzz/ (clang only)" OFF)

if(SHARDGYM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "SHARDGYM_FUZZ=ON needs clang (libFuzzer): "
                        "-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  if(SHARDGYM_SANITIZE AND NOT SHARDGYM_SANITIZE STREQUAL "address,undefined")
    message(FATAL_ERROR "SHARDGYM_FUZZ=ON already builds with address,undefined")
  endif()
  set(SHARDGYM_SANITIZE "address,undefined")
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(SHARDGYM_SANITIZE)
  if(SHARDGYM_SANITIZE MATCHES "thread" AND SHARDGYM_SANITIZE MATCHES "address")
    message(FATAL_ERROR "SHARDGYM_SANITIZE: thread and address cannot be combined")
  endif()
  add_compile_options(-fsanitize=${SHARDGYM_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${SHARDGYM_SANITIZE})
  if(SHARDGYM_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
  message(STATUS "ShardGym: sanitizers ${SHARDGYM_SANITIZE}")
endif()
