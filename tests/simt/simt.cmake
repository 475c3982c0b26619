# AMD's GPU code, run in `make test` without an AMD GPU (tests/simt/simt.h: gpu_vendor.h's third
# half, the kernels run on the host thread by thread with the target's wave size and matrix
# instructions, the runtime on host memory). Included from tests/tests.cmake. C++: the kernels'
# language (STYLE's tests are C; these cannot be). The directory's flags are C's
# (-Wstrict-prototypes, ...), so these targets take their own.
#
# tests/simt/test_<name>.cc: one kernel's source against a reference, once a target kind, as
# test_<name>_<kind>.
#
# The whole backend: every src/backends/gpu/*.cu compiled for the emulator as a target kind, with
# the backend tables (registry.c, ports.c) naming it "rocm", and tests/gpu's programs run against
# it as they run against CUDA on the H200 (CELER_TEST_BACKEND=rocm): test_gpu_<name>_<kind>; and
# test_engine_<kind>.
# Kinds: gfx90a (CDNA 2: wave64, MFMA 16x16x16), gfx1100 (RDNA 3: wave32, WMMA), gfx942 (CDNA 3:
# MFMA 16x16x32, the integer tiles' one difference: test_gpu_formats, _ops, _ports and test_engine
# alone); and SM90, an NVIDIA sm_90 run as the "cuda" backend (mma.sync and ldmatrix: the batch
# kernel, the tiled prefill kernel's NVIDIA fragments and prefill attention's f16 products, which
# otherwise run only on the H200; the same programs as gfx942, and test_gpu_moe; not test_batcher,
# 107 s, whose batches' products test_gpu_formats holds already: the suite is past 25 minutes on 2
# cores). Not in the sanitizer build (stacks switched under the sanitizers' feet, and several
# times slower) nor in a GPU build (which runs tests/gpu on its device).
enable_language(CXX)

set(CELER_SIMT_WARNINGS -Wall -Wextra -Wshadow -Wno-unknown-pragmas -Wno-unused-parameter -Wno-unused-function)
if(CELER_WERROR)
  list(APPEND CELER_SIMT_WARNINGS -Werror)
endif()

# UBSan's alignment check alone (no other sanitizer: the emulator's speed), fatal
set(CELER_SIMT_ALIGN -fsanitize=alignment -fno-sanitize-recover=alignment)
# a program holding emulated kernels links the check's runtime
function(celer_simt_link t)
  get_target_property(type ${t} TYPE)
  if(NOT type STREQUAL OBJECT_LIBRARY)
    target_link_options(${t} PRIVATE -fsanitize=alignment)
  endif()
endfunction()

# C++ for the emulator as kind (an amx_layout.h kind, or SM90: NVIDIA's) on a target: the defines
# and flags.
function(celer_simt_target t kind arch)
  set_property(TARGET ${t} PROPERTY COMPILE_OPTIONS "")
  set_target_properties(${t} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  if(kind STREQUAL SM90)
    target_compile_definitions(${t} PRIVATE CELER_SIMT SIMT_NVIDIA SIMT_KIND=CELER_AMX_NONE CELER_GPU_ARCHS="${arch}")
  else()
    target_compile_definitions(${t} PRIVATE CELER_SIMT SIMT_KIND=CELER_AMX_${kind} CELER_GPU_ARCHS="${arch}")
  endif()
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src
                                          ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/tests/simt)
  # the kernels' type punning and unrolling pragmas are the GPU compilers' dialect; -O1: the
  # emulator's switches dominate, and the templates compile in a third of -O3's time. A load or
  # store off its type's alignment stops the program, as it faults a GPU ("misaligned address"),
  # where x86 would read it silently: a 3-bit MLX row's scales once sat 4 bytes off their 8-byte
  # loads and only a GPU found it
  target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${CELER_SIMT_WARNINGS} -fno-strict-aliasing -O1
                                      ${CELER_SIMT_ALIGN}>)
  celer_simt_link(${t})
endfunction()

# `celer verify` (exe, an emulated celer) of the tiny MLX directories named after backend
# (tests/data/mlx_dirs) against the CPU, as test name: one failure stops it.
function(simt_verify_mlx name exe backend)
  add_test(NAME ${name}
           COMMAND sh -c "for m in \"$@\"; do \"$0\" verify -m tests/data/mlx_dirs/$m --backend ${backend} --against cpu || exit 1; done"
                   $<TARGET_FILE:${exe}> ${ARGN}
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES TIMEOUT 600 LABELS simt FAIL_REGULAR_EXPRESSION "disagreed with the")
endfunction()

set(CELER_SIMT_KINDS WMMA11 MFMA16)
set(CELER_SIMT_ARCH_WMMA11 gfx1100)
set(CELER_SIMT_ARCH_MFMA16 gfx90a)
set(CELER_SIMT_ARCH_MFMA32 gfx942)
set(CELER_SIMT_ARCH_SM90 90)

file(GLOB CELER_SIMT_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/simt/test_*.cc)
foreach(src ${CELER_SIMT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  foreach(kind ${CELER_SIMT_KINDS})
    string(TOLOWER ${kind} lower)
    add_executable(${name}_${lower} ${src})
    celer_simt_target(${name}_${lower} ${kind} ${CELER_SIMT_ARCH_${kind}})
    add_test(NAME ${name}_${lower} COMMAND ${name}_${lower} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  endforeach()
endforeach()

if(NOT CELER_SANITIZE AND NOT TARGET celer_gpu)
  # each GPU source as a C++ file (one wrapper, included once a kind)
  file(GLOB CELER_SIMT_CU CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backends/gpu/*.cu)
  set(CELER_SIMT_WRAPPERS)
  foreach(cu ${CELER_SIMT_CU})
    get_filename_component(n ${cu} NAME_WE)
    file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/simt/${n}.cc CONTENT "#include \"backends/gpu/${n}.cu\"\n")
    list(APPEND CELER_SIMT_WRAPPERS ${PROJECT_BINARY_DIR}/simt/${n}.cc)
  endforeach()
  # tests/gpu's programs, test_engine (the engine's generate on the GPU: "auto" takes it; 10-20 s a
  # kind here) and test_batcher (continuous batches; 75-130 s a kind, since batches of more than 8
  # tokens take the matrix units' tile: 350 s on the decode kernels)
  file(GLOB CELER_GPU_TESTS_SIMT CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/gpu/test_*.c)
  list(APPEND CELER_GPU_TESTS_SIMT ${PROJECT_SOURCE_DIR}/tests/test_engine.c ${PROJECT_SOURCE_DIR}/tests/test_batcher.c)
  foreach(kind WMMA11 MFMA16 MFMA32 SM90)
    string(TOLOWER ${kind} lower)
    set(be rocm)
    set(be_kind ROCM)
    if(kind STREQUAL SM90)
      set(be cuda)
      set(be_kind CUDA)
    endif()
    # objects, not an archive: the tables here must win over celer_core's CPU-only ones
    add_library(celer_simt_${lower} OBJECT ${CELER_SIMT_WRAPPERS} ${PROJECT_SOURCE_DIR}/src/backends/registry.c
                                           ${PROJECT_SOURCE_DIR}/src/backends/ports.c)
    celer_simt_target(celer_simt_${lower} ${kind} ${CELER_SIMT_ARCH_${kind}})
    target_compile_definitions(celer_simt_${lower} PRIVATE CELER_HAVE_GPU=1 CELER_GPU_BACKEND_KIND=CELER_BACKEND_${be_kind}
                                                           CELER_GPU_BACKEND_NAME="${be}"
                                                           CELER_VERSION="${PROJECT_VERSION}")
    foreach(src ${CELER_GPU_TESTS_SIMT})
      get_filename_component(name ${src} NAME_WE)
      if(kind STREQUAL MFMA32 AND NOT name MATCHES "^test_(gpu_formats|gpu_ops|gpu_ports|engine)$")
        continue()
      endif()
      if(kind STREQUAL SM90 AND NOT name MATCHES "^test_(gpu_formats|gpu_ops|gpu_ports|gpu_moe|engine)$")
        continue()
      endif()
      set(t ${name}_${lower})
      add_executable(${t} ${src} $<TARGET_OBJECTS:celer_simt_${lower}>)
      celer_simt_link(${t})
      target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
      target_link_libraries(${t} PRIVATE celer_core stdc++)
      add_test(NAME ${t} COMMAND ${t} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
      # the backend's self-checks (gpu_selfcheck.cu) would leave a wrong kernel off and pass: here
      # their note fails the test
      set_tests_properties(${t} PROPERTIES ENVIRONMENT "CELER_TEST_BACKEND=${be}" TIMEOUT 1200 LABELS simt
                                           FAIL_REGULAR_EXPRESSION "disagreed with the")
    endforeach()
  endforeach()
  # celer itself on the emulated gfx90a: `celer verify` of the default model (SmolLM2-135M, Q4_1)
  # against the CPU (its 8 prompts, 32 tokens each): the HIP build's prefill token for token on a
  # real model, 90-110 s here. Fewer tokens take longer: steps of up to 32 tokens run the decode
  # kernels, a pass per 8 tokens, whose many shuffles are the emulator's slowest work (-n 16: 380
  # s; `--decode`, a step ~3 s: by hand only).
  add_executable(celer-simt-gfx90a ${CELER_CLI_SOURCES} $<TARGET_OBJECTS:celer_simt_mfma16>)
  celer_simt_link(celer-simt-gfx90a)
  target_link_libraries(celer-simt-gfx90a PRIVATE celer_server celer_core stdc++)
  add_test(NAME verify_simt_gfx90a
           COMMAND sh -c "exec \"$0\" verify -m \"$(scripts/fetch-model smollm2-135m)\" --backend rocm --against cpu"
                   $<TARGET_FILE:celer-simt-gfx90a>
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(verify_simt_gfx90a PROPERTIES FIXTURES_REQUIRED models TIMEOUT 1200 LABELS simt
                                                     FAIL_REGULAR_EXPRESSION "disagreed with the")
  # and of tiny MLX directories in mxfp4 (the integer decode kernels' e2m1 codes; heads of 32, whose
  # outputs a wave64 target's attention makes in half its lanes), ~8 s each
  simt_verify_mlx(verify_simt_gfx90a_mxfp4 celer-simt-gfx90a rocm tiny-llama-mlx-mxfp4 tiny-qwen3-mlx-mxfp4)
  # and celer on the emulated sm_90: `celer verify` of tiny MLX directories against the CPU, their
  # prompts' prefills (up to 32 tokens: NVIDIA's batch kernel on affine 4 and 8 bits and mxfp4, a
  # MoE's expert tiles) and embedding rows on the "cuda" backend
  add_executable(celer-simt-sm90 ${CELER_CLI_SOURCES} $<TARGET_OBJECTS:celer_simt_sm90>)
  celer_simt_link(celer-simt-sm90)
  target_link_libraries(celer-simt-sm90 PRIVATE celer_server celer_core stdc++)
  simt_verify_mlx(verify_simt_sm90_mlx celer-simt-sm90 cuda tiny-llama-mlx-q4g64 tiny-qwen3-mlx-q8g32
                  tiny-qwen3moe-mlx-q4g64 tiny-qwen3-mlx-mxfp4)
  # the self-checks made to fail (CELER_GPU_CHECK=bad): both AMD paths' notes said, each path left
  # off, and every result still right on the kernels left
  add_test(NAME test_gpu_ports_mfma16_spoiled COMMAND test_gpu_ports_mfma16 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(test_gpu_ports_mfma16_spoiled PROPERTIES
    ENVIRONMENT "CELER_TEST_BACKEND=rocm;CELER_GPU_CHECK=bad" LABELS simt
    PASS_REGULAR_EXPRESSION "integer matrix units' product disagreed.*prefill attention on the matrix units disagreed.*test_gpu_ports: passed \\(0 failed checks\\)")
endif()
