# Every tests/test_<module>.c is a small C program: exit 0 passes. Python parity tests under
# tests/reference/ run with the venv that .ci/run makes (.venv), against real models that the
# fetch_models fixture downloads once into ~/.cache/celer/models.

file(GLOB CELER_C_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/test_*.c)
foreach(src ${CELER_C_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE celer_core)
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
endforeach()

if(EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  set(CELER_TEST_PYTHON ${PROJECT_SOURCE_DIR}/.venv/bin/python)
else()
  find_program(CELER_TEST_PYTHON NAMES python3 REQUIRED)
endif()

add_test(NAME fetch_models
         COMMAND ${PROJECT_SOURCE_DIR}/scripts/fetch-model smollm2-135m gemma3-270m qwen2.5-coder-0.5b
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(fetch_models PROPERTIES FIXTURES_SETUP models TIMEOUT 900)

# tests/tools/<name>.c: helper programs the Python tests run (not tests themselves), built into
# the build folder next to celer.
file(GLOB CELER_TEST_TOOLS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/tools/*.c)
foreach(src ${CELER_TEST_TOOLS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE celer_core)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
endforeach()

# tests/reference/test_<name>.py: pytest, given the celer binary and the build folder.
file(GLOB CELER_PY_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/reference/test_*.py)
foreach(src ${CELER_PY_TESTS})
  get_filename_component(name ${src} NAME_WE)
  # Under the sanitizers (an unoptimized build) the real models' forward passes take more than
  # ten minutes: the parity test runs the tiny models there, all of them in `make test`.
  set(select "")
  if(CELER_SANITIZE AND name STREQUAL "test_mlx_parity")
    set(select -k tiny)
  endif()
  add_test(NAME py_${name}
           COMMAND ${CELER_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${src} ${select}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set(timeout 600)
  if(name STREQUAL "test_server") # under the sanitizers its 96 concurrent requests take ~6 minutes
    set(timeout 1200)
  endif()
  set_tests_properties(py_${name} PROPERTIES
    FIXTURES_REQUIRED models
    ENVIRONMENT "CELER_BIN=$<TARGET_FILE:celer>;CELER_BUILD_DIR=${PROJECT_BINARY_DIR}"
    TIMEOUT ${timeout})
endforeach()

# tests/cli/test_<name>.py: pytest on the command line with crafted files; no models needed.
file(GLOB CELER_CLI_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/cli/test_*.py)
foreach(src ${CELER_CLI_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_test(NAME cli_${name}
           COMMAND ${CELER_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${src}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli_${name} PROPERTIES
    ENVIRONMENT "CELER_BIN=$<TARGET_FILE:celer>;CELER_BUILD_DIR=${PROJECT_BINARY_DIR}"
    TIMEOUT 600)
endforeach()

# scripts/smoke.sh: the default model answers "What is the capital of France?" through its own
# chat template, as `make run` does.
add_test(NAME smoke COMMAND ${PROJECT_SOURCE_DIR}/scripts/smoke.sh $<TARGET_FILE:celer>
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(smoke PROPERTIES FIXTURES_REQUIRED models TIMEOUT 300)

# No code outside the kernel-port tables and the GPU vendor header branches on the backend kind
# or the vendor (DESIGN.md, Backends).
add_test(NAME lint_backend_branches
         COMMAND ${CELER_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/tests/lint/check_backend_branches.py ${PROJECT_SOURCE_DIR})

# dev/kernels' harnesses are built by hand (their README), not by CMake: compiled here, warnings as
# errors, so that a change of an op's signature or a header cannot leave them broken unnoticed.
file(GLOB CELER_DEV_KERNELS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/dev/kernels/*.c)
foreach(src ${CELER_DEV_KERNELS})
  get_filename_component(name ${src} NAME_WE)
  add_test(NAME dev_kernels_${name}
           COMMAND ${CMAKE_C_COMPILER} -std=c11 -fsyntax-only -D_GNU_SOURCE -Wall -Wextra -Werror
                   -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src -I${PROJECT_SOURCE_DIR}/tests ${src})
endforeach()

# dev/patches wait for a device run (their README), each applied by scripts/gpu-check.sh's ab to a
# copy of the tree: each must still apply (with the patches it is stacked on), so that a change to
# the lines one touches shows here rather than as a failed build in the device's few minutes.
add_test(NAME lint_dev_patches
         COMMAND ${CELER_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/tests/lint/check_dev_patches.py ${PROJECT_SOURCE_DIR} --self-test)

# Every GPU kernel begins by waiting for the kernel before it, or loads only weights before it
# waits (gpu_vendor.h: early launches).
add_test(NAME lint_kernel_entry
         COMMAND ${CELER_TEST_PYTHON} ${PROJECT_SOURCE_DIR}/tests/lint/check_kernel_entry.py ${PROJECT_SOURCE_DIR} --self-test)

# tests/gpu/test_<name>.c: every GPU op against the CPU backend. Built with the GPU backend
# (CELER_CUDA / CELER_HIP) and run where a GPU is (scripts/gpu-check.sh); a missing device fails.
if(TARGET celer_gpu)
  file(GLOB CELER_GPU_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/gpu/test_*.c)
  foreach(src ${CELER_GPU_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
    target_link_libraries(${name} PRIVATE celer_core)
    add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(${name} PROPERTIES LABELS gpu)
  endforeach()
endif()

# CI has no GPU: it compiles and links the CUDA build (sm_80, sm_90) and the HIP build (gfx1030,
# gfx90a, gfx940, gfx1100, Debian's hipcc), and checks that the HIP binary, where no AMD GPU
# exists, says so in one line and exits 3 (scripts/check-gpu-builds.sh). Not in the sanitizer build or a GPU build itself.
if(NOT CELER_SANITIZE AND NOT TARGET celer_gpu)
  add_test(NAME gpu_builds
           COMMAND ${PROJECT_SOURCE_DIR}/scripts/check-gpu-builds.sh ${PROJECT_BINARY_DIR}/gpu-cuda
                   ${PROJECT_BINARY_DIR}/gpu-hip
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(gpu_builds PROPERTIES TIMEOUT 1500 ENVIRONMENT "JOBS=2")
endif()

# tests/simt: AMD's GPU code run on the host (tests/simt/simt.cmake says how).
include(${PROJECT_SOURCE_DIR}/tests/simt/simt.cmake)
