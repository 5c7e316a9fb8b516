# The portable build (GPUMETER_PORTABLE=ON), which scripts/release.sh makes the release bundle
# from: binaries that run on any Linux of their architecture with glibc 2.34 or newer. Every
# library but glibc is linked statically, from Debian's archives: the C++ runtime and GCC's
# unwinder, gRPC, protobuf, abseil, re2, c-ares, yaml-cpp, OpenSSL, zlib, libcrypt; fmt
# header-only (Debian ships no archive of it). docs/packaging.md ("The portable build") gives
# the reasons. glibc stays shared: NVML and ROCm SMI are dlopen()ed from the host, which a static
# glibc cannot do. scripts/release.sh refuses a binary that needs anything else.

# The archive beside a shared library (/x/libfoo.so.1.2 -> /x/libfoo.a), or "" when there is none.
function(gpumeter_static_archive out path)
  set(${out} "" PARENT_SCOPE)
  # Two steps: ${CMAKE_MATCH_1} in the same if() would be expanded before the match.
  if(path MATCHES "^(.*/lib[^/]+)\\.so(\\.[0-9.]+)?$")
    set(archive "${CMAKE_MATCH_1}.a")
    if(EXISTS "${archive}")
      set(${out} "${archive}" PARENT_SCOPE)
    endif()
  endif()
endfunction()

# Turns every imported shared library that `target` links, directly or not, into its archive.
# Imported targets get a new IMPORTED_LOCATION; plain paths in link lists are replaced.
function(gpumeter_link_static target)
  get_property(seen GLOBAL PROPERTY GPUMETER_PORTABLE_SEEN)
  if(target IN_LIST seen OR NOT TARGET ${target})
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY GPUMETER_PORTABLE_SEEN ${target})
  get_target_property(imported ${target} IMPORTED)
  get_target_property(type ${target} TYPE)
  if(imported AND type MATCHES "^(SHARED|UNKNOWN)_LIBRARY$")
    foreach(prop IMPORTED_LOCATION IMPORTED_LOCATION_NONE IMPORTED_LOCATION_RELEASE
                 IMPORTED_LOCATION_RELWITHDEBINFO IMPORTED_LOCATION_NOCONFIG)
      get_target_property(location ${target} ${prop})
      if(location)
        gpumeter_static_archive(archive "${location}")
        if(archive)
          set_target_properties(${target} PROPERTIES ${prop} "${archive}")
        endif()
      endif()
    endforeach()
  endif()
  set(props INTERFACE_LINK_LIBRARIES)
  if(NOT imported AND NOT type STREQUAL "INTERFACE_LIBRARY")
    list(APPEND props LINK_LIBRARIES)
  endif()
  foreach(prop IN LISTS props)
    get_target_property(libs ${target} ${prop})
    if(NOT libs)
      continue()
    endif()
    set(rewritten "")
    foreach(lib IN LISTS libs)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" name "${lib}")
      if(TARGET ${name})
        gpumeter_link_static(${name})
      elseif(IS_ABSOLUTE "${name}")
        gpumeter_static_archive(archive "${name}")
        if(archive)
          string(REPLACE "${name}" "${archive}" lib "${lib}")
        endif()
      elseif(name MATCHES "^-l(.+)$")
        # -lre2 from a package's pkg-config module: its archive, unless the library is glibc's.
        set(short "${CMAKE_MATCH_1}")
        if(NOT short MATCHES "^(c|m|dl|rt|pthread|util|resolv|atomic)$")
          find_library(GPUMETER_PORTABLE_ARCHIVE_${short} NAMES lib${short}.a)
          if(GPUMETER_PORTABLE_ARCHIVE_${short})
            set(lib "${GPUMETER_PORTABLE_ARCHIVE_${short}}")
          endif()
        endif()
      endif()
      list(APPEND rewritten "${lib}")
    endforeach()
    set_target_properties(${target} PROPERTIES ${prop} "${rewritten}")
  endforeach()
endfunction()

# The C++ runtime and the unwinder linked in, and the calls newer than glibc 2.34 sent to
# src/portable/glibc_floor.c.
function(gpumeter_portable_runtime target)
  gpumeter_link_static(${target})
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:gpumeter_glibc_floor>)
  target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc -Wl,--gc-sections
                      -Wl,--wrap=arc4random -Wl,--wrap=arc4random_buf
                      -Wl,--wrap=_dl_find_object)
endfunction()

# The simulated libnvidia-ml.so.1 also takes yaml-cpp's reads of a glibc variable
# (src/portable/single_threaded.c).
function(gpumeter_portable_library target)
  gpumeter_portable_runtime(${target})
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:gpumeter_single_threaded>)
endfunction()
