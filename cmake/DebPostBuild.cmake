# CPack's post-build script for the .deb (CPACK_POST_BUILD_SCRIPTS in cmake/Package.cmake),
# doing what dh_strip and dpkg-gencontrol do for a Debian package:
#  - /usr/bin/gangrun stripped (dh_strip's sections: .comment, .note) with its debug
#    information (the build's -g1 line tables and the symbols) in
#    gangrun-dbgsym_<version>_<arch>.ddeb, found by build id
#    (/usr/lib/debug/.build-id/xx/yyyy.debug), as Debian's dbgsym packages are. CPack's
#    own CPACK_DEBIAN_DEBUGINFO_PACKAGE writes md5sums with the build machine's paths and
#    no copyright, which lintian refuses.
#  - Installed-Size as dpkg-gencontrol computes it (each file's size rounded up to KiB, 1 per
#    directory and link): CPack 3.25 sums the targets of symbolic links, so msrun and
#    torchrun (links to /usr/bin/gangrun) counted the binary three times (56 MB for 19 MB).
#  - md5sums of what the package now holds.
foreach(deb ${CPACK_PACKAGE_FILES})
  if(NOT deb MATCHES "\\.deb$")
    continue()
  endif()
  # CPack copies its own packages from its staging directory to CPACK_PACKAGE_DIRECTORY (the
  # -B directory) after this script; the .ddeb is written there directly.
  set(out_dir ${CPACK_PACKAGE_DIRECTORY})
  set(work ${deb}.raw)
  set(dbg ${deb}.dbgsym)
  file(REMOVE_RECURSE ${work} ${dbg})
  execute_process(COMMAND dpkg-deb -R ${deb} ${work} COMMAND_ERROR_IS_FATAL ANY)
  file(READ ${work}/DEBIAN/control control)
  string(REGEX MATCH "Version: ([^\n]+)" _ "${control}")
  set(version ${CMAKE_MATCH_1})
  string(REGEX MATCH "Architecture: ([^\n]+)" _ "${control}")
  set(arch ${CMAKE_MATCH_1})

  # The debug file, then the stripped binary.
  set(binary ${work}/usr/bin/gangrun)
  execute_process(COMMAND readelf -n ${binary} OUTPUT_VARIABLE notes COMMAND_ERROR_IS_FATAL ANY)
  string(REGEX MATCH "Build ID: ([0-9a-f]+)" _ "${notes}")
  set(build_id ${CMAKE_MATCH_1})
  if(NOT build_id)
    message(FATAL_ERROR "usr/bin/gangrun has no build id (link with --build-id)")
  endif()
  string(SUBSTRING ${build_id} 0 2 id_dir)
  string(SUBSTRING ${build_id} 2 -1 id_file)
  set(debug_file ${dbg}/usr/lib/debug/.build-id/${id_dir}/${id_file}.debug)
  file(MAKE_DIRECTORY ${dbg}/usr/lib/debug/.build-id/${id_dir} ${dbg}/DEBIAN
       ${dbg}/usr/share/doc)
  execute_process(COMMAND objcopy --only-keep-debug --compress-debug-sections ${binary}
                          ${debug_file} COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND strip --remove-section=.comment --remove-section=.note
                          --strip-unneeded ${binary} COMMAND_ERROR_IS_FATAL ANY)
  file(CHMOD ${debug_file} PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  # Debian's dbgsym packages point their doc directory at the package they debug.
  file(CREATE_LINK gangrun ${dbg}/usr/share/doc/gangrun-dbgsym SYMBOLIC)

  foreach(root ${work} ${dbg})
    file(GLOB_RECURSE entries LIST_DIRECTORIES true RELATIVE ${root} ${root}/*)
    set(kib 0)
    set(sums "")
    foreach(entry ${entries})
      if(entry MATCHES "^DEBIAN(/|$)")
        continue()
      endif()
      if(IS_SYMLINK ${root}/${entry} OR IS_DIRECTORY ${root}/${entry})
        math(EXPR kib "${kib} + 1")
      else()
        file(SIZE ${root}/${entry} bytes)
        math(EXPR kib "${kib} + (${bytes} + 1023) / 1024")
        if(NOT entry MATCHES "^etc/")  # conffiles have their own sums in dpkg's database
          file(MD5 ${root}/${entry} sum)
          string(APPEND sums "${sum}  ${entry}\n")
        endif()
      endif()
    endforeach()
    file(WRITE ${root}/DEBIAN/md5sums "${sums}")
    set(size_${root} ${kib})
  endforeach()

  string(REGEX REPLACE "Installed-Size: [0-9]+" "Installed-Size: ${size_${work}}" control
                       "${control}")
  file(WRITE ${work}/DEBIAN/control "${control}")
  file(WRITE ${dbg}/DEBIAN/control "Package: gangrun-dbgsym
Source: gangrun
Version: ${version}
Auto-Built-Package: debug-symbols
Architecture: ${arch}
Maintainer: ${CPACK_DEBIAN_PACKAGE_MAINTAINER}
Installed-Size: ${size_${dbg}}
Depends: gangrun (= ${version})
Section: debug
Priority: optional
Description: debug symbols for gangrun
Build-Ids: ${build_id}
")
  foreach(root ${work} ${dbg})
    file(CHMOD ${root}/DEBIAN/control ${root}/DEBIAN/md5sums
         PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endforeach()
  execute_process(COMMAND dpkg-deb --root-owner-group -Zxz -b ${work} ${deb}
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND dpkg-deb --root-owner-group -Zxz -b ${dbg}
                          ${out_dir}/gangrun-dbgsym_${version}_${arch}.ddeb
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  file(REMOVE_RECURSE ${work} ${dbg})
endforeach()
