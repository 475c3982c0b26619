# libFuzzer targets: tests/fuzz/fuzz_<name>.c, seeds in tests/fuzz/corpus/<name>/.
# Each is built with ASan + UBSan against its own instrumented copy of the engine sources and
# runs for CELER_FUZZ_SECONDS under ctest; a finding fails the test and leaves crash-* files in
# build/fuzz-artifacts/.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "CELER_FUZZ needs clang (libFuzzer): apt-get install clang, then make test CC=clang")
endif()

set(CELER_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g)
add_library(celer_core_fuzz STATIC ${CELER_SOURCES})
target_include_directories(celer_core_fuzz PUBLIC include src ${CJSON_INCLUDE_DIR})
target_link_libraries(celer_core_fuzz PUBLIC ${CJSON_LIBRARY} Threads::Threads m)
target_compile_definitions(celer_core_fuzz PUBLIC CELER_VERSION="${PROJECT_VERSION}")
target_compile_options(celer_core_fuzz PRIVATE ${CELER_FUZZ_FLAGS})

file(GLOB CELER_FUZZERS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
foreach(src ${CELER_FUZZERS})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" short ${name})
  add_executable(${name} ${src})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${name} PRIVATE celer_core_fuzz)
  set(work ${PROJECT_BINARY_DIR}/fuzz-corpus/${short})
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
                   $<TARGET_FILE:${name}> -max_total_time=${CELER_FUZZ_SECONDS} -rss_limit_mb=1024
                   -timeout=10 -print_final_stats=1 -artifact_prefix=${PROJECT_BINARY_DIR}/fuzz-artifacts/
                   ${work} ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${short})
  set_tests_properties(${name} PROPERTIES TIMEOUT 300)
  file(MAKE_DIRECTORY ${work} ${PROJECT_BINARY_DIR}/fuzz-artifacts)
endforeach()
