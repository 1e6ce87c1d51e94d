# `make install` and the Debian package (`cpack -G DEB` in the build directory makes
# gangrun_<version>_amd64.deb): /usr/bin/gangrun; msrun and torchrun in /usr/lib/gangrun/bin
# (never shadowing a real torchrun on PATH); the systemd units; man pages and bash completion
# written by `gangrun generate` from the option tables; the README. The package depends on
# exactly the shared libraries the binary links (dpkg-shlibdeps).

set(GANGRUN_PKG_DIR ${CMAKE_BINARY_DIR}/pkg)
set(GANGRUN_PKG_FILES)
foreach(page gangrun msrun torchrun)
  add_custom_command(OUTPUT ${GANGRUN_PKG_DIR}/${page}.1
    COMMAND ${CMAKE_COMMAND} -E make_directory ${GANGRUN_PKG_DIR}
    COMMAND sh -c "\"$1\" generate man ${page} > \"$2\"" sh $<TARGET_FILE:gangrun>
            ${GANGRUN_PKG_DIR}/${page}.1
    DEPENDS gangrun VERBATIM)
  list(APPEND GANGRUN_PKG_FILES ${GANGRUN_PKG_DIR}/${page}.1)
endforeach()
add_custom_command(OUTPUT ${GANGRUN_PKG_DIR}/gangrun.bash
  COMMAND ${CMAKE_COMMAND} -E make_directory ${GANGRUN_PKG_DIR}
  COMMAND sh -c "\"$1\" generate completion > \"$2\"" sh $<TARGET_FILE:gangrun>
          ${GANGRUN_PKG_DIR}/gangrun.bash
  DEPENDS gangrun VERBATIM)
list(APPEND GANGRUN_PKG_FILES ${GANGRUN_PKG_DIR}/gangrun.bash)
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
install(FILES ${GANGRUN_PKG_DIR}/gangrun.1 ${GANGRUN_PKG_DIR}/msrun.1 ${GANGRUN_PKG_DIR}/torchrun.1
        DESTINATION share/man/man1)
install(FILES ${GANGRUN_PKG_DIR}/gangrun.bash DESTINATION share/bash-completion/completions
        RENAME gangrun)
install(FILES ${GANGRUN_PKG_DIR}/systemd/gangrun-agent.service
              ${GANGRUN_PKG_DIR}/systemd/gangrun-scheduler.service
        DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/gangrun.env DESTINATION share/doc/gangrun/examples)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION share/doc/gangrun)
install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/health/gangrun-health-check DESTINATION lib/gangrun)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gangrun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed launcher for ranked processes (msrun and torchrun compatible)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "gangrun developers <gangrun@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
include(CPack)
