# Portable linking of the shipped binaries (gpumem.node, libgpumem_torch.so): they load on every
# x86_64 Linux with glibc 2.28 or later (RHEL 8, Ubuntu 20.04, Debian 10 and newer: where CUDA 13
# and PyTorch's manylinux_2_28 wheels run), whatever glibc and GCC built them.
#
#   - glibc: linked against the glibc 2.17 libraries of @napi-rs/cross-toolchain-x64-target-x86_64
#     (an npm devDependency of @gpumem/native: the toolchain napi-rs builds Node addons with), so that
#     every symbol binds to its oldest version (pthread_create@GLIBC_2.2.5, not @GLIBC_2.34). The
#     five that the code and GCC 12's libstdc++ use but glibc 2.17 lacks (__libc_single_threaded,
#     arc4random, getentropy, memfd_create, __cxa_thread_atexit_impl) are defined inside the binary
#     by src/portable/glibc_compat.cpp. The headers stay the build machine's: only the link changes.
#   - libstdc++: linked statically and kept local (-Wl,--exclude-libs,ALL), so no GLIBCXX or CXXABI
#     version is needed. libgcc stays the shared libgcc_s.so.1 (GCC_3.0 to GCC_4.2 symbols, in every
#     distribution): Debian's static libgcc_eh calls _dl_find_object, which is glibc 2.35.
#   - the CUDA runtime is static already (CUDA::cudart_static).
#
# GPUMEM_PORTABLE (cache or environment): AUTO (default) links portably when the sysroot is found
# on x86_64 Linux, ON requires it, OFF links against the build machine's glibc (the binaries then
# need that glibc and its libstdc++). Sanitized builds are never portable (the sanitizer runtimes
# need the host's), nor are builds that make neither binary (the host-only C++ tests).
# native/scripts/check-glibc.sh checks the result; `npm test -w native` runs it.

set(GPUMEM_PORTABLE_TOOLCHAIN_PACKAGE "@napi-rs/cross-toolchain-x64-target-x86_64")
if(DEFINED ENV{GPUMEM_PORTABLE} AND NOT "$ENV{GPUMEM_PORTABLE}" STREQUAL "")
  set(GPUMEM_PORTABLE "$ENV{GPUMEM_PORTABLE}" CACHE STRING "Portable link of the shipped binaries: AUTO, ON or OFF" FORCE)
endif()
set(GPUMEM_PORTABLE "AUTO" CACHE STRING "Portable link of the shipped binaries: AUTO, ON or OFF")
set_property(CACHE GPUMEM_PORTABLE PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${GPUMEM_PORTABLE}" _gpumem_portable_mode)
if(NOT _gpumem_portable_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "gpumem: GPUMEM_PORTABLE must be AUTO, ON or OFF, not '${GPUMEM_PORTABLE}'")
endif()

# Extracts the glibc part of the toolchain's sysroot (its libstdc++ and the rest are left out: the
# compiler's own libstdc++.a must be the one linked) into the build folder, once.
function(_gpumem_extract_sysroot out_var)
  set(${out_var} "" PARENT_SCOPE)
  set(archive "")
  foreach(modules ${PROJECT_SOURCE_DIR}/node_modules ${PROJECT_SOURCE_DIR}/../node_modules)
    if(EXISTS ${modules}/${GPUMEM_PORTABLE_TOOLCHAIN_PACKAGE}/x86_64-unknown-linux-gnu.tar.xz)
      set(archive ${modules}/${GPUMEM_PORTABLE_TOOLCHAIN_PACKAGE}/x86_64-unknown-linux-gnu.tar.xz)
      break()
    endif()
  endforeach()
  if(NOT archive)
    return()
  endif()
  set(destination ${CMAKE_BINARY_DIR}/glibc-sysroot)
  set(sysroot ${destination}/x86_64-unknown-linux-gnu/sysroot)
  file(SHA256 ${archive} digest)
  if(EXISTS ${destination}/archive.sha256)
    file(READ ${destination}/archive.sha256 extracted)
  endif()
  if(NOT "${extracted}" STREQUAL "${digest}")
    message(STATUS "gpumem: extracting glibc 2.17 from ${archive}")
    file(REMOVE_RECURSE ${destination})
    set(p "./x86_64-unknown-linux-gnu/sysroot")
    file(ARCHIVE_EXTRACT INPUT ${archive} DESTINATION ${destination}
         PATTERNS "${p}/lib64" "${p}/usr/lib64" "${p}/lib/ld-*" "${p}/lib/libc[.-]*" "${p}/lib/libm[.-]*"
                  "${p}/lib/libdl[.-]*" "${p}/lib/librt[.-]*" "${p}/lib/libpthread[.-]*" "${p}/lib/libgcc_s.so*"
                  "${p}/usr/lib/libc.so" "${p}/usr/lib/libc_nonshared.a" "${p}/usr/lib/libm.so" "${p}/usr/lib/libdl.so"
                  "${p}/usr/lib/librt.so" "${p}/usr/lib/libpthread.so" "${p}/usr/lib/libpthread_nonshared.a")
    file(WRITE ${destination}/archive.sha256 "${digest}")
  endif()
  set(${out_var} ${sysroot} PARENT_SCOPE)
endfunction()

set(GPUMEM_PORTABLE_SYSROOT "")
set(_gpumem_portable_why "")
if(_gpumem_portable_mode STREQUAL "OFF")
  set(_gpumem_portable_why "GPUMEM_PORTABLE=OFF")
elseif(NOT CMAKE_JS_VERSION AND NOT GPUMEM_HAVE_CUDA)
  set(_gpumem_portable_why "this build makes neither gpumem.node nor libgpumem_torch.so")
elseif(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux" OR NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(_gpumem_portable_why "the glibc sysroot is for x86_64 Linux, not ${CMAKE_SYSTEM_NAME} ${CMAKE_SYSTEM_PROCESSOR}")
elseif(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(_gpumem_portable_why "-static-libstdc++ needs GCC's libstdc++.a (the compiler is ${CMAKE_CXX_COMPILER_ID})")
elseif(GPUMEM_SANITIZE)
  set(_gpumem_portable_why "sanitized builds link the host's sanitizer runtimes")
else()
  _gpumem_extract_sysroot(GPUMEM_PORTABLE_SYSROOT)
  if(NOT GPUMEM_PORTABLE_SYSROOT)
    set(_gpumem_portable_why "${GPUMEM_PORTABLE_TOOLCHAIN_PACKAGE} is not installed (npm ci in the repository installs it)")
  endif()
endif()
if(GPUMEM_PORTABLE_SYSROOT)
  message(STATUS "gpumem: portable link (glibc >= 2.28, static libstdc++) against ${GPUMEM_PORTABLE_SYSROOT}")
elseif(_gpumem_portable_mode STREQUAL "ON" AND (CMAKE_JS_VERSION OR GPUMEM_HAVE_CUDA))
  message(FATAL_ERROR "gpumem: GPUMEM_PORTABLE=ON but no portable link is possible: ${_gpumem_portable_why}")
else()
  message(STATUS "gpumem: linking against this machine's glibc and libstdc++ (not portable): ${_gpumem_portable_why}")
endif()

# gpumem_portable_link(<shared library target>): links it portably when the sysroot is in use.
function(gpumem_portable_link target)
  if(NOT GPUMEM_PORTABLE_SYSROOT)
    return()
  endif()
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src/portable/glibc_compat.cpp)
  # The sysroot's folders come before the compiler's own (which hold the host's libc.so); its
  # libstdc++ was left out, so -static-libstdc++ takes the compiler's libstdc++.a.
  target_link_options(${target} PRIVATE
    --sysroot=${GPUMEM_PORTABLE_SYSROOT}
    -L${GPUMEM_PORTABLE_SYSROOT}/usr/lib -L${GPUMEM_PORTABLE_SYSROOT}/lib
    -static-libstdc++ -Wl,--exclude-libs,ALL)
  # glibc 2.17 keeps the threads, dlopen and shm_open in their own libraries; FindThreads saw the
  # host's glibc, where they are part of libc.
  target_link_libraries(${target} PRIVATE pthread dl rt m)
endfunction()
