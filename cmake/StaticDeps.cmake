# Links gRPC, protobuf, Abseil, OpenSSL, c-ares, re2, upb and zlib statically where Debian
# ships their archives (libgrpc-dev, libabsl-dev, libprotobuf-dev, libssl-dev, ... do): the
# dynamic loader then maps and relocates a handful of libraries at every start instead of
# about sixty (issue #13: `gangrun --help` and every launch paid 5-10 ms for them).
#
# Every imported library target of the top directory (those find_package created, and their
# dependencies) whose shared object has an archive beside it is pointed at the archive; CMake's
# target graph keeps the link order right. spdlog and fmt ship no archive and stay shared.
function(gangrun_link_static_archives)
  get_property(targets DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY IMPORTED_TARGETS)
  set(switched 0)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(SHARED_LIBRARY|UNKNOWN_LIBRARY)$")
      continue()
    endif()
    set(properties IMPORTED_LOCATION)
    get_target_property(configurations ${target} IMPORTED_CONFIGURATIONS)
    if(configurations)
      foreach(configuration IN LISTS configurations)
        list(APPEND properties IMPORTED_LOCATION_${configuration})
      endforeach()
    endif()
    foreach(property IN LISTS properties)
      get_target_property(location ${target} ${property})
      if(location AND location MATCHES "^(.*/lib[^/]+)\\.so(\\.[0-9.]+)?$")
        set(archive "${CMAKE_MATCH_1}.a")
        if(EXISTS "${archive}")
          set_target_properties(${target} PROPERTIES ${property} "${archive}")
          math(EXPR switched "${switched} + 1")
        endif()
      endif()
    endforeach()
  endforeach()
  # re2 comes from pkg-config as an interface target that names -lre2.
  find_library(GANGRUN_RE2_ARCHIVE NAMES libre2.a)
  if(TARGET re2::re2 AND GANGRUN_RE2_ARCHIVE)
    set_property(TARGET re2::re2 PROPERTY INTERFACE_LINK_LIBRARIES "${GANGRUN_RE2_ARCHIVE}")
    math(EXPR switched "${switched} + 1")
  endif()
  message(STATUS "gangrun: ${switched} dependency libraries linked statically")
endfunction()
