# `make install` and the Debian package (`cpack -G DEB` in the build directory makes
# gangrun_<version>_amd64.deb and gangrun-dbgsym_<version>_amd64.ddeb), laid out as Debian's
# policy asks, so that lintian passes (tests/deploy/check_deb.sh runs it):
#   /usr/bin/gangrun, stripped (its symbols, and its debug information when the build has
#     any, are in the dbgsym package); msrun and torchrun in /usr/lib/gangrun/bin, never
#     shadowing a real torchrun on PATH;
#   man pages gangrun(1), gangrun-msrun(1), gangrun-torchrun(1) (never MindSpore's or
#     PyTorch's names), gzip -9n, and bash completion for gangrun, msrun and torchrun, one
#     file each (bash-completion loads them lazily), written by `gangrun generate` from the
#     option tables;
#   the systemd units; the conffile /etc/gangrun/gangrun.env (one host: the daemon on
#     loopback, the agent pointed at it) and a token postinst makes (mode 0600);
#   /usr/share/doc/gangrun: copyright, changelog.gz, README.md, the cluster example env.
# Depends comes from dpkg-shlibdeps (the binary links only libc dynamically).

set(GANGRUN_PKG_DIR ${CMAKE_BINARY_DIR}/pkg)
set(GANGRUN_DEBIAN ${PROJECT_SOURCE_DIR}/deploy/debian)
set(GANGRUN_PKG_FILES)
foreach(page gangrun msrun torchrun)
  if(page STREQUAL "gangrun")
    set(name gangrun)
  else()
    set(name gangrun-${page})
  endif()
  add_custom_command(OUTPUT ${GANGRUN_PKG_DIR}/${name}.1.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${GANGRUN_PKG_DIR}
    COMMAND sh -c "\"$1\" generate man ${page} | gzip -9n > \"$2\"" sh $<TARGET_FILE:gangrun>
            ${GANGRUN_PKG_DIR}/${name}.1.gz
    DEPENDS gangrun VERBATIM)
  list(APPEND GANGRUN_PKG_FILES ${GANGRUN_PKG_DIR}/${name}.1.gz)
  add_custom_command(OUTPUT ${GANGRUN_PKG_DIR}/completions/${page}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${GANGRUN_PKG_DIR}/completions
    COMMAND sh -c "\"$1\" generate completion ${page} > \"$2\"" sh $<TARGET_FILE:gangrun>
            ${GANGRUN_PKG_DIR}/completions/${page}
    DEPENDS gangrun VERBATIM)
  list(APPEND GANGRUN_PKG_FILES ${GANGRUN_PKG_DIR}/completions/${page})
endforeach()
configure_file(${GANGRUN_DEBIAN}/changelog.in ${GANGRUN_PKG_DIR}/changelog @ONLY)
add_custom_command(OUTPUT ${GANGRUN_PKG_DIR}/changelog.gz
  COMMAND sh -c "gzip -9n < \"$1\" > \"$2\"" sh ${GANGRUN_PKG_DIR}/changelog
          ${GANGRUN_PKG_DIR}/changelog.gz
  DEPENDS ${GANGRUN_DEBIAN}/changelog.in VERBATIM)
list(APPEND GANGRUN_PKG_FILES ${GANGRUN_PKG_DIR}/changelog.gz)
add_custom_target(gangrun_package_files ALL DEPENDS ${GANGRUN_PKG_FILES})

# The units as deploy/systemd has them, with the packaged binary's path.
foreach(unit gangrun-agent.service gangrun-scheduler.service)
  file(READ ${PROJECT_SOURCE_DIR}/deploy/systemd/${unit} text)
  string(REPLACE "/usr/local/bin/gangrun" "/usr/bin/gangrun" text "${text}")
  file(WRITE ${GANGRUN_PKG_DIR}/systemd/${unit} "${text}")
endforeach()

install(TARGETS gangrun RUNTIME DESTINATION bin)
install(CODE "
  set(dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/lib/gangrun/bin\")
  file(MAKE_DIRECTORY \"\${dir}\")
  foreach(name msrun torchrun)
    file(CREATE_LINK ../../../bin/gangrun \"\${dir}/\${name}\" SYMBOLIC)
  endforeach()")
install(FILES ${GANGRUN_PKG_DIR}/gangrun.1.gz ${GANGRUN_PKG_DIR}/gangrun-msrun.1.gz
              ${GANGRUN_PKG_DIR}/gangrun-torchrun.1.gz
        DESTINATION share/man/man1)
install(FILES ${GANGRUN_PKG_DIR}/completions/gangrun ${GANGRUN_PKG_DIR}/completions/msrun
              ${GANGRUN_PKG_DIR}/completions/torchrun
        DESTINATION share/bash-completion/completions)
install(FILES ${GANGRUN_PKG_DIR}/systemd/gangrun-agent.service
              ${GANGRUN_PKG_DIR}/systemd/gangrun-scheduler.service
        DESTINATION lib/systemd/system)
# /etc is absolute: the package's conffile, whatever the prefix.
install(FILES ${GANGRUN_DEBIAN}/gangrun.env DESTINATION /etc/gangrun)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/gangrun.env
        DESTINATION share/doc/gangrun/examples RENAME gangrun-cluster.env)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${GANGRUN_DEBIAN}/copyright
              ${GANGRUN_PKG_DIR}/changelog.gz
        DESTINATION share/doc/gangrun)
install(FILES ${GANGRUN_DEBIAN}/lintian-overrides DESTINATION share/lintian/overrides
        RENAME gangrun)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/health/gangrun-health-check DESTINATION lib/gangrun)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gangrun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed launcher for ranked processes (msrun and torchrun compatible)")
# The extended description, each line under 80 columns (CPack indents them; an empty line
# becomes Debian's " .").
set(CPACK_PACKAGE_DESCRIPTION
    "gangrun starts N ranked worker processes over M hosts for a training job:
a drop-in for MindSpore's msrun and PyTorch's torchrun, and any program that
needs ranks. It forms the job, gives every worker its rank and environment,
notices a failed or hung rank, stops and restarts the whole job, and leaves no
process behind.

The package also holds a long-lived daemon (gangrun-scheduler.service) and a
per-host agent (gangrun-agent.service) to which jobs are submitted.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "gangrun developers <gangrun@example.org>")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "bash-completion, python3, elfutils")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${GANGRUN_DEBIAN}/conffiles ${GANGRUN_DEBIAN}/postinst ${GANGRUN_DEBIAN}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
# Stripped, with the debug information in gangrun-dbgsym (a .ddeb beside the .deb), md5sums
# and Installed-Size as dpkg computes it: cmake/DebPostBuild.cmake says why CPack's own
# do not do.
set(CPACK_POST_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/DebPostBuild.cmake)
include(CPack)
