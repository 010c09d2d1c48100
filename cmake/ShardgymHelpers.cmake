# Helpers shared by every folder.

# shardgym_warnings(target): the project's warning set.
function(shardgym_warnings target)
  # A function that falls off its end without a return is undefined behaviour that compiles:
  # always an error (a missing `return d;` once built clean and crashed at run time).
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
                                           -Werror=return-type)
  if(SHARDGYM_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# shardgym_library(NAME name SOURCES ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# A static library `shardgym_<name>` with alias `shardgym::<name>`; headers are included
# as "folder/file.h" from the repository root.
function(shardgym_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(shardgym_${ARG_NAME} STATIC ${ARG_SOURCES})
  add_library(shardgym::${ARG_NAME} ALIAS shardgym_${ARG_NAME})
  target_include_directories(shardgym_${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(shardgym_${ARG_NAME} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(shardgym_${ARG_NAME} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  shardgym_warnings(shardgym_${ARG_NAME})
endfunction()

# shardgym_registrations(NAME name SOURCES ... DEPS ...)
# Static-registration units as an OBJECT library whose objects go into shardgym::builtins.
function(shardgym_registrations)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_library(shardgym_${ARG_NAME}_reg OBJECT ${ARG_SOURCES})
  # PIC as the libraries: the Python extension (python/) links these objects into a module.
  set_target_properties(shardgym_${ARG_NAME}_reg PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(shardgym_${ARG_NAME}_reg PUBLIC ${ARG_DEPS})
  shardgym_warnings(shardgym_${ARG_NAME}_reg)
  target_sources(shardgym_builtins INTERFACE $<TARGET_OBJECTS:shardgym_${ARG_NAME}_reg>)
  target_link_libraries(shardgym_builtins INTERFACE ${ARG_DEPS})
endfunction()

# shardgym_test(NAME name SOURCES ... LABELS ... [LIBS ...] [TIMEOUT s])
# One GoogleTest executable = one ctest test, labelled (cpu, multirank, gpu, slow).
function(shardgym_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE shardgym::builtins ${ARG_LIBS} GTest::gtest shardgym_test_main)
  shardgym_warnings(${ARG_NAME})
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  # A run whose every test was GTEST_SKIP'd exits 77 (tests/test_main.cpp): ctest says skipped.
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
    SKIP_RETURN_CODE 77
    ENVIRONMENT "SHARDGYM_SOURCE_DIR=${PROJECT_SOURCE_DIR};SHARDGYM_BINARY_DIR=${PROJECT_BINARY_DIR}")
endfunction()
