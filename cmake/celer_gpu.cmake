# The GPU backend's build (DESIGN.md, Backends: "Build"). Included by CMakeLists.txt right after
# celer_core is defined.
#
#   -DCELER_CUDA=ON [-DCELER_CUDA_ARCHS="80;90"]           nvcc, CMake's CUDA language
#   -DCELER_HIP=ON  [-DCELER_HIP_ARCHS="gfx1030;gfx90a"]   hipcc (Debian 12: apt-get install hipcc)
#
# Either one builds src/backends/gpu/*.cu into the static library celer_gpu; the .c and .h files
# beside them are plain C, already part of celer_core. celer_gpu defines, for itself and for
# everything that links celer_core:
#   CELER_HAVE_GPU=1
#   CELER_GPU_ARCHS="<the arch list as given, ';'-separated>"  (which targets this binary has code for)
#   CELER_GPU_BACKEND_KIND=CELER_BACKEND_CUDA or CELER_BACKEND_ROCM  (backend.h's enum; ports.c's slot)
#   CELER_GPU_BACKEND_NAME="cuda" or "rocm"                           (registry.c's backend name)
#
# Linking. celer_core's backend registry calls celer_gpu_backend_create (in celer_gpu), and the
# .cu files call back into celer_core (errors, the backend table, gfx target checks). With static
# archives each must come after the other on the link line, so the two are linked both ways:
# celer_core PUBLIC celer_gpu, celer_gpu PRIVATE celer_core. CMake allows such a cycle between
# STATIC libraries and repeats the pair on the link line (libceler_core.a libceler_gpu.a
# libceler_core.a ...), so every consumer of celer_core (celer, tests, benches) links whatever the
# order of references. Separable compilation (relocatable device code) is off: a kernel and the
# __device__ functions it calls live in one .cu file or in a header.
#
# Run path. Every executable defined after this file gets the GPU runtime's directory as its
# build and install RUNPATH (unless it is a directory the loader searches anyway), so `celer`
# runs without LD_LIBRARY_PATH.

option(CELER_CUDA "Build the GPU backend for NVIDIA GPUs with nvcc (CUDA)" OFF)
option(CELER_HIP  "Build the GPU backend for AMD GPUs with hipcc (HIP/ROCm)" OFF)
option(CELER_GPU_TRACE "CUDA: every kernel stamps its dependency wait, for CELER_GPU_TRACE=1's timeline of replayed \
steps (src/backends/gpu/gpu_trace.cu; a measuring build, not for use)" OFF)
set(CELER_CUDA_ARCHS "80;90" CACHE STRING
    "CUDA architectures for CELER_CUDA, as CMAKE_CUDA_ARCHITECTURES takes them (80 = sm_80 code + compute_80 PTX)")
set(CELER_HIP_ARCHS "gfx1030;gfx90a" CACHE STRING
    "AMD targets for CELER_HIP, as hipcc's --offload-arch takes them (gfx1030, gfx90a, gfx1151, ...)")

if(CELER_CUDA AND CELER_HIP)
  message(FATAL_ERROR "CELER_CUDA and CELER_HIP are both ON: a build targets one GPU vendor. "
                      "Pick one, e.g. -DCELER_CUDA=ON -DCELER_HIP=OFF, in separate build folders.")
endif()
if(NOT CELER_CUDA AND NOT CELER_HIP)
  return()
endif()

file(GLOB CELER_GPU_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backends/gpu/*.cu)
if(NOT CELER_GPU_SOURCES)
  message(FATAL_ERROR "CELER_CUDA/CELER_HIP: no src/backends/gpu/*.cu files to build")
endif()

# A runtime library's directory as a RUNPATH of every executable defined after this point.
function(_celer_gpu_runpath lib)
  get_filename_component(dir "${lib}" DIRECTORY)
  get_filename_component(real "${dir}" REALPATH)
  foreach(sys /lib /usr/lib /lib64 /usr/lib64 /lib/${CMAKE_LIBRARY_ARCHITECTURE} /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
    get_filename_component(sys "${sys}" REALPATH)
    if(real STREQUAL sys)
      message(STATUS "celer: GPU runtime in ${dir}, searched by the loader: no RUNPATH needed")
      return()
    endif()
  endforeach()
  set(CMAKE_BUILD_RPATH ${CMAKE_BUILD_RPATH} ${dir} PARENT_SCOPE)
  set(CMAKE_INSTALL_RPATH ${CMAKE_INSTALL_RPATH} ${dir} PARENT_SCOPE)
  message(STATUS "celer: executables get RUNPATH ${dir}")
endfunction()

# CELER_GPU_ARCHS is a C string whose ';' is spelled \073, its octal escape ("80\07390" is
# "80;90": an octal escape takes at most three digits). CMake splits compile definitions at every
# ';', even one that $<SEMICOLON> writes, so a literal ';' cannot reach a -D. nvcc removes one
# level of backslashes from a -D value (hipcc and the C compilers do not), so CUDA sources get the
# backslash doubled. _celer_gpu_archs_def is the plain spelling, _celer_gpu_archs_defs both.
function(_celer_gpu_archs_define archs)
  string(REPLACE ";" "\\073" c_archs "${archs}")
  string(REPLACE ";" "\\\\073" nvcc_archs "${archs}")
  set(_celer_gpu_archs_def "CELER_GPU_ARCHS=\"${c_archs}\"" PARENT_SCOPE)
  set(_celer_gpu_archs_defs
      "$<$<COMPILE_LANGUAGE:CUDA>:CELER_GPU_ARCHS=\"${nvcc_archs}\">"
      "$<$<NOT:$<COMPILE_LANGUAGE:CUDA>>:CELER_GPU_ARCHS=\"${c_archs}\">" PARENT_SCOPE)
endfunction()

# ------------------------------------------------------------------------------------------ CUDA
if(CELER_CUDA)
  if(NOT CELER_CUDA_ARCHS)
    message(FATAL_ERROR "CELER_CUDA_ARCHS is empty: give the architectures, e.g. -DCELER_CUDA_ARCHS=\"80;90\"")
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(CELER_NVCC nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME PATH_SUFFIXES bin PATHS /usr/local/cuda/bin)
    if(NOT CELER_NVCC)
      message(FATAL_ERROR "CELER_CUDA=ON needs nvcc, the CUDA toolkit's compiler: install NVIDIA's CUDA toolkit "
                          "(Debian: apt-get install nvidia-cuda-toolkit; or NVIDIA's cuda-toolkit in /usr/local/cuda) "
                          "and put nvcc on PATH, or pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc")
    endif()
    set(CMAKE_CUDA_COMPILER "${CELER_NVCC}" CACHE FILEPATH "CUDA compiler")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${CELER_CUDA_ARCHS}")
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared) # libcudart.so, not cudart_static, in every link
  enable_language(CUDA)
  # Executables stay linked by the C compiler, like the rest of the project (the fuzzers and the
  # sanitizers need clang's driver), not by nvcc's host g++; the CUDA objects' C++ runtime is
  # then named below (stdc++).
  set(CMAKE_CUDA_LINKER_PREFERENCE_PROPAGATES 0)
  find_package(CUDAToolkit REQUIRED)
  message(STATUS "celer: CUDA ✓ nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CELER_CUDA_ARCHS}, ${CUDA_cudart_LIBRARY}")

  add_library(celer_gpu STATIC ${CELER_GPU_SOURCES})
  # The directory's flags (-Wstrict-prototypes, -Wmissing-prototypes, sanitizers) are for the C
  # sources; nvcc gets its own.
  set_property(TARGET celer_gpu PROPERTY COMPILE_OPTIONS "")
  set_target_properties(celer_gpu PROPERTIES
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
    CUDA_ARCHITECTURES "${CELER_CUDA_ARCHS}"
    CUDA_RUNTIME_LIBRARY Shared
    CUDA_SEPARABLE_COMPILATION OFF)
  target_compile_options(celer_gpu PRIVATE -Xcompiler=-Wall,-Wextra)
  if(CELER_GPU_TRACE)
    target_compile_definitions(celer_gpu PRIVATE CELER_GPU_TRACE=1)
    message(STATUS "celer: a trace build (CELER_GPU_TRACE): kernels stamp their dependency waits")
  endif()
  if(CELER_WERROR)
    target_compile_options(celer_gpu PRIVATE -Xcompiler=-Werror)
  endif()
  # cuBLAS: the f16 and f32 products of long steps (src/backends/gpu/gpu_blas.cu); in the toolkit's
  # library folder, beside cudart (the RUNPATH below covers both)
  target_link_libraries(celer_gpu PUBLIC CUDA::cudart CUDA::cublas stdc++)
  # celer_core predates enable_language(CUDA) but now links CUDA code: it needs the list too.
  set_target_properties(celer_core PROPERTIES CUDA_ARCHITECTURES "${CELER_CUDA_ARCHS}" CUDA_RUNTIME_LIBRARY Shared)
  _celer_gpu_archs_define("${CELER_CUDA_ARCHS}")
  set(_celer_gpu_kind CELER_BACKEND_CUDA)
  set(_celer_gpu_name cuda)
  _celer_gpu_runpath("${CUDA_cudart_LIBRARY}")
endif()

# ------------------------------------------------------------------------------------------- HIP
# CMake 3.25's HIP language wants ROCm's own layout (/usr/lib/cmake/hip-lang), which Debian's
# packages do not have, so each .cu goes through hipcc as a custom command (-x hip is hipcc's
# choice for .cu), with a depfile for the headers; the objects make up celer_gpu.
if(CELER_HIP)
  if(CELER_GPU_TRACE)
    message(FATAL_ERROR "CELER_GPU_TRACE stamps CUDA's dependency waits (griddepcontrol); HIP has none: "
                        "build the trace with -DCELER_CUDA=ON, or drop -DCELER_GPU_TRACE=ON")
  endif()
  if(NOT CELER_HIP_ARCHS)
    message(FATAL_ERROR "CELER_HIP_ARCHS is empty: give the targets, e.g. -DCELER_HIP_ARCHS=\"gfx1030;gfx90a\"")
  endif()
  find_program(CELER_HIPCC hipcc HINTS ENV ROCM_PATH PATH_SUFFIXES bin PATHS /opt/rocm/bin)
  if(NOT CELER_HIPCC)
    message(FATAL_ERROR "CELER_HIP=ON needs hipcc: apt-get install hipcc (Debian 12; it brings clang-15, "
                        "libamdhip64-dev and rocm-device-libs), or a ROCm install with ROCM_PATH set")
  endif()
  find_path(CELER_HIP_INCLUDE_DIR hip/hip_runtime_api.h HINTS ENV ROCM_PATH PATH_SUFFIXES include PATHS /opt/rocm/include)
  find_library(CELER_AMDHIP64 amdhip64 HINTS ENV ROCM_PATH PATH_SUFFIXES lib PATHS /opt/rocm/lib)
  if(NOT CELER_HIP_INCLUDE_DIR OR NOT CELER_AMDHIP64)
    message(FATAL_ERROR "CELER_HIP=ON needs the HIP runtime and its headers: apt-get install libamdhip64-dev")
  endif()
  # The device libraries (ocml.bc, ockl.bc, ...). Debian's hipcc 5.2 finds its own, but a plain
  # ROCm-less clang does not, so the path is found here and always passed.
  find_path(CELER_HIP_DEVICE_LIB_PATH ocml.bc
            HINTS ENV ROCM_PATH PATH_SUFFIXES amdgcn/bitcode lib/amdgcn/bitcode
            PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode /opt/rocm/amdgcn/bitcode
            NO_DEFAULT_PATH)
  if(NOT CELER_HIP_DEVICE_LIB_PATH)
    message(FATAL_ERROR "CELER_HIP=ON needs the ROCm device libraries (ocml.bc): apt-get install rocm-device-libs")
  endif()

  # Each processor needs its ISA-version library there; Debian 12's rocm-device-libs has none for
  # gfx11 or gfx12 (it predates them), which would otherwise fail below with clang's words only.
  foreach(_celer_arch ${CELER_HIP_ARCHS})
    string(REGEX MATCH "^gfx([0-9a-f]+)(:|$)" _celer_isa "${_celer_arch}")
    if(_celer_isa AND NOT EXISTS ${CELER_HIP_DEVICE_LIB_PATH}/oclc_isa_version_${CMAKE_MATCH_1}.bc)
      message(FATAL_ERROR "CELER_HIP_ARCHS has ${_celer_arch}, but ${CELER_HIP_DEVICE_LIB_PATH} has no "
                          "oclc_isa_version_${CMAKE_MATCH_1}.bc: these device libraries predate it. Use a ROCm "
                          "install that has it (ROCM_PATH=/opt/rocm, or -DCELER_HIP_DEVICE_LIB_PATH=its "
                          "amdgcn/bitcode), or leave ${_celer_arch} out")
    endif()
  endforeach()

  set(_celer_hip_flags -std=c++17 -fPIC -Wall -Wextra --rocm-device-lib-path=${CELER_HIP_DEVICE_LIB_PATH})
  foreach(_celer_arch ${CELER_HIP_ARCHS})
    list(APPEND _celer_hip_flags --offload-arch=${_celer_arch})
  endforeach()
  if(CMAKE_BUILD_TYPE STREQUAL "Debug")
    list(APPEND _celer_hip_flags -O0 -g)
  elseif(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    list(APPEND _celer_hip_flags -O2 -g)
  else()
    list(APPEND _celer_hip_flags -O3)
  endif()
  if(CELER_WERROR)
    list(APPEND _celer_hip_flags -Werror)
  endif()
  # hipcc runs outside CMake's compile rules, so celer_gpu's flags are spelled out here (a
  # definition added to celer_gpu below must be added here too): what celer_core's C sources get,
  # the include folders (never a system folder such as /usr/include: -I on it breaks libstdc++'s
  # #include_next), _GNU_SOURCE and CELER_VERSION, and celer_gpu's own definitions.
  foreach(_celer_dir ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src ${CJSON_INCLUDE_DIR} ${CELER_HIP_INCLUDE_DIR})
    if(NOT _celer_dir IN_LIST CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES AND NOT _celer_dir STREQUAL "/usr/include")
      list(APPEND _celer_hip_flags -I${_celer_dir})
    endif()
  endforeach()
  list(APPEND _celer_hip_flags -D_GNU_SOURCE -DCELER_VERSION="${PROJECT_VERSION}" -DCELER_HAVE_GPU=1
                               -DCELER_GPU_BACKEND_KIND=CELER_BACKEND_ROCM -DCELER_GPU_BACKEND_NAME="rocm")

  # A configure-time check that hipcc, the headers and the device libraries work together.
  set(_celer_hip_check "${CELER_HIPCC}|${CELER_HIP_ARCHS}|${CELER_HIP_DEVICE_LIB_PATH}")
  if(NOT CELER_HIP_CHECKED STREQUAL _celer_hip_check)
    set(_celer_dir ${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/celer_hip_check)
    file(MAKE_DIRECTORY ${_celer_dir})
    file(WRITE ${_celer_dir}/check.cu "#include <hip/hip_runtime.h>\n__global__ void k(float *x) { x[threadIdx.x] = __shfl_xor(x[threadIdx.x], 1, warpSize); }\n")
    execute_process(COMMAND ${CELER_HIPCC} ${_celer_hip_flags} -c check.cu -o check.o
                    WORKING_DIRECTORY ${_celer_dir} RESULT_VARIABLE _celer_rc OUTPUT_VARIABLE _celer_out ERROR_VARIABLE _celer_out)
    if(NOT _celer_rc EQUAL 0)
      message(FATAL_ERROR "CELER_HIP=ON: ${CELER_HIPCC} cannot compile a kernel for ${CELER_HIP_ARCHS}:\n${_celer_out}\n"
                          "On Debian 12: apt-get install hipcc libamdhip64-dev rocm-device-libs")
    endif()
    set(CELER_HIP_CHECKED "${_celer_hip_check}" CACHE INTERNAL "hipcc check passed for")
  endif()
  message(STATUS "celer: HIP ✓ ${CELER_HIPCC}, archs ${CELER_HIP_ARCHS}, ${CELER_AMDHIP64}")

  _celer_gpu_archs_define("${CELER_HIP_ARCHS}")
  set(_celer_gpu_kind CELER_BACKEND_ROCM)
  set(_celer_gpu_name rocm)
  list(APPEND _celer_hip_flags "-D${_celer_gpu_archs_def}")
  set(_celer_hip_objects "")
  set(_celer_hip_objdir ${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/celer_gpu.dir/hip)
  file(MAKE_DIRECTORY ${_celer_hip_objdir})
  # Make does not rerun a custom command whose command line changed: the objects depend on this
  # file, rewritten only when the flags change.
  list(JOIN _celer_hip_flags " " _celer_hip_flags_line)
  file(CONFIGURE OUTPUT ${_celer_hip_objdir}/flags.txt CONTENT "${CELER_HIPCC} ${_celer_hip_flags_line}\n")
  foreach(_celer_src ${CELER_GPU_SOURCES})
    get_filename_component(_celer_name ${_celer_src} NAME)
    file(RELATIVE_PATH _celer_rel ${PROJECT_SOURCE_DIR} ${_celer_src})
    set(_celer_obj ${_celer_hip_objdir}/${_celer_name}.o)
    add_custom_command(
      OUTPUT ${_celer_obj}
      COMMAND ${CELER_HIPCC} ${_celer_hip_flags} -MD -MF ${_celer_obj}.d -c ${_celer_src} -o ${_celer_obj}
      DEPENDS ${_celer_src} ${_celer_hip_objdir}/flags.txt
      DEPFILE ${_celer_obj}.d
      COMMENT "Building HIP object ${_celer_rel}.o"
      VERBATIM)
    list(APPEND _celer_hip_objects ${_celer_obj})
  endforeach()
  set_source_files_properties(${_celer_hip_objects} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  add_library(celer_gpu STATIC ${_celer_hip_objects})
  set_target_properties(celer_gpu PROPERTIES LINKER_LANGUAGE C)
  target_include_directories(celer_gpu PUBLIC ${CELER_HIP_INCLUDE_DIR})
  # C sources that include <hip/hip_runtime_api.h> need the platform named (hipcc defines it itself).
  target_compile_definitions(celer_gpu PUBLIC __HIP_PLATFORM_AMD__=1)
  # the HIP objects' host code is C++ (clang's runtime helpers), like libamdhip64 itself
  target_link_libraries(celer_gpu PUBLIC ${CELER_AMDHIP64} stdc++)
  _celer_gpu_runpath("${CELER_AMDHIP64}")
endif()

# ---------------------------------------------------------------------------------------- common
target_include_directories(celer_gpu PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(celer_gpu PUBLIC CELER_HAVE_GPU=1 ${_celer_gpu_archs_defs}
                           CELER_GPU_BACKEND_KIND=${_celer_gpu_kind} CELER_GPU_BACKEND_NAME="${_celer_gpu_name}")
target_link_libraries(celer_gpu PRIVATE celer_core) # the cycle described at the top
target_link_libraries(celer_core PUBLIC celer_gpu)
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
