# Cross-compiles gpumeter for arm64 (NVIDIA Grace nodes) on a Debian 12 amd64 machine, with
# Debian's cross toolchain (crossbuild-essential-arm64) and the multiarch arm64 development
# packages (scripts/install-deps.sh release). scripts/release.sh --arch arm64 passes it:
#   cmake -S . -B build-release-arm64 -DGPUMETER_PORTABLE=ON \
#         -DCMAKE_TOOLCHAIN_FILE=$PWD/cmake/toolchain-arm64.cmake
# Libraries, headers and CMake packages are the arm64 ones (/usr/lib/aarch64-linux-gnu); programs
# run at build time (protoc, grpc_cpp_plugin, python3) are the amd64 host's (/usr/bin).
#
# yaml-cpp: Debian 12's libyaml-cpp-dev is not Multi-Arch, so libyaml-cpp-dev:arm64 would remove
# the amd64 one that the native build needs. Its arm64 .deb (with libyaml-cpp0.7:arm64, whose
# library the package's CMake config checks for) is unpacked, not installed, into
#   ${GPUMETER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpumeter}/arm64-extra/
# the first time this file is read; the config there points at its own tree, whose
# libyaml-cpp.a cmake/Portable.cmake links.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Test executables (configured, not built by release.sh): gtest_discover_tests runs them under
# qemu. The arm64 loader and libc are the multiarch libc6:arm64's, so no -L is needed.
if(EXISTS /usr/bin/qemu-aarch64-static)
  set(CMAKE_CROSSCOMPILING_EMULATOR /usr/bin/qemu-aarch64-static)
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
endif()

# The host's root is the "sysroot": multiarch keeps the two architectures apart by directory, and
# CMAKE_LIBRARY_ARCHITECTURE makes find_library and find_package look in the arm64 ones.
# Programs come from the host, never from the target's paths.
set(CMAKE_FIND_ROOT_PATH /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (re2, and OpenSSL's hints): the arm64 modules and the architecture-independent ones
# only; a PKG_CONFIG_PATH from the environment would add amd64 ones.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
unset(ENV{PKG_CONFIG_PATH})

# yaml-cpp for arm64, unpacked from Debian's packages (see above).
if(NOT "$ENV{GPUMETER_CACHE_DIR}" STREQUAL "")
  set(_gpumeter_cache "$ENV{GPUMETER_CACHE_DIR}")
elseif(NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(_gpumeter_cache "$ENV{XDG_CACHE_HOME}/gpumeter")
else()
  set(_gpumeter_cache "$ENV{HOME}/.cache/gpumeter")
endif()
set(_gpumeter_extra "${_gpumeter_cache}/arm64-extra")
set(_gpumeter_yaml_config "${_gpumeter_extra}/usr/lib/aarch64-linux-gnu/cmake/yaml-cpp/yaml-cpp-config.cmake")
if(NOT EXISTS "${_gpumeter_yaml_config}" OR NOT EXISTS "${_gpumeter_extra}/usr/lib/aarch64-linux-gnu/libyaml-cpp.a")
  message(STATUS "toolchain-arm64: unpacking libyaml-cpp-dev:arm64 into ${_gpumeter_extra}")
  set(_gpumeter_debs "${_gpumeter_cache}/arm64-extra.debs")
  set(_gpumeter_tmp "${_gpumeter_cache}/arm64-extra.tmp")
  file(REMOVE_RECURSE "${_gpumeter_debs}" "${_gpumeter_tmp}")
  file(MAKE_DIRECTORY "${_gpumeter_debs}")
  execute_process(COMMAND apt-get download libyaml-cpp-dev:arm64 libyaml-cpp0.7:arm64
                  WORKING_DIRECTORY "${_gpumeter_debs}" RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  file(GLOB _gpumeter_deb_files "${_gpumeter_debs}/*.deb")
  list(LENGTH _gpumeter_deb_files _n)
  if(NOT _rc EQUAL 0 OR NOT _n EQUAL 2)
    message(FATAL_ERROR "toolchain-arm64: 'apt-get download libyaml-cpp-dev:arm64 libyaml-cpp0.7:arm64' "
            "failed (${_rc}): ${_err}\nIt needs the arm64 architecture in dpkg "
            "(dpkg --add-architecture arm64; apt-get update) and Debian's mirror.")
  endif()
  foreach(_deb IN LISTS _gpumeter_deb_files)
    execute_process(COMMAND dpkg-deb -x "${_deb}" "${_gpumeter_tmp}" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "toolchain-arm64: dpkg-deb -x ${_deb} failed (${_rc})")
    endif()
  endforeach()
  file(REMOVE_RECURSE "${_gpumeter_extra}" "${_gpumeter_debs}")
  file(RENAME "${_gpumeter_tmp}" "${_gpumeter_extra}")
endif()
# Searched before the system prefixes; its config's targets point into the unpacked tree.
list(FIND CMAKE_PREFIX_PATH "${_gpumeter_extra}/usr" _gpumeter_index)
if(_gpumeter_index EQUAL -1)
  list(APPEND CMAKE_PREFIX_PATH "${_gpumeter_extra}/usr")
endif()
# Its library directory counts as a system one, as /usr/lib/aarch64-linux-gnu would if the package
# were installed: the imported yaml-cpp target stays a SHARED one after cmake/Portable.cmake points
# it at libyaml-cpp.a, so CMake would otherwise give every binary that links it a RUNPATH into
# this cache (Platform/UnixPaths.cmake appends the usual ones to this list).
set(CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES "${_gpumeter_extra}/usr/lib/aarch64-linux-gnu")
