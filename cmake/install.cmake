# install.cmake: what `cmake --install build --prefix P` puts where (docs/api.md, "Installing"):
#
#   P/bin/flaretune                       the command line
#   P/LIBDIR/libflaretune.so.0[.1.0]      the C API (soname libflaretune.so.0), and .so
#   P/LIBDIR/libflaretune.a               the same, static (C API symbols only)
#   P/include/flaretune.h                 the C API's one header
#   P/LIBDIR/pkgconfig/flaretune.pc       pkg-config: the shared library
#   P/LIBDIR/pkgconfig/flaretune-static.pc   libflaretune.a and the libraries it needs
#   P/LIBDIR/cmake/flaretune/             find_package(flaretune): flaretune::flaretune (shared)
#                                         and flaretune::flaretune_static
#   P/share/flaretune/                    the kernel sources the library compiles at run time
#                                         (NVRTC, the emulator) and emitted packages copy, and
#                                         the templates of an emitted package's files
#   P/share/doc/flaretune/                README and docs/
#   P/share/man/man1/flaretune.1          the --help text as a manual page (with help2man)
include(CMakePackageConfigHelpers)

# The installed binary and shared library keep the folders of the libraries they link that the
# loader does not search by itself (OpenBLAS's OpenMP build, the CUDA toolkit) as their RUNPATH,
# as the build's have: without it they would load the system's default OpenBLAS, or not start.
set_target_properties(flaretune flaretune_shared PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS flaretune RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS flaretune_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${FT_STATIC_LIB} DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/flaretune.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY kernels core DESTINATION ${CMAKE_INSTALL_DATADIR}/flaretune
        FILES_MATCHING PATTERN "*.c" PATTERN "*.h" PATTERN "*.cu" PATTERN "*.cuh")
# The templates an emitted package's files are written from (profiles/src/emit_package_runtime.c).
install(DIRECTORY profiles/templates DESTINATION ${CMAKE_INSTALL_DATADIR}/flaretune/profiles)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/flaretune/version.h
              ${CMAKE_CURRENT_BINARY_DIR}/include/flaretune/source_hash.h
        DESTINATION ${CMAKE_INSTALL_DATADIR}/flaretune/include/flaretune)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.md")

# What a program linking libflaretune.a needs besides it, as full paths (the same libraries
# libflaretune.so records as its own dependencies).
# (OpenMP's list names libpthread too, which is -lpthread below.)
set(_ft_omp ${OpenMP_C_LIBRARIES})
list(FILTER _ft_omp EXCLUDE REGEX "pthread")
set(FT_PRIVATE_LIBS ${JANSSON_LIBRARIES} ${ZLIB_LIBRARIES} ${FT_OPENBLAS_LIB} ${CURSES_LIBRARIES}
    ${_ft_omp})
if(FT_HAVE_CUDA)
  foreach(t CUDA::cupti CUDA::cublasLt CUDA::cudart)
    get_target_property(_loc ${t} IMPORTED_LOCATION)
    list(APPEND FT_PRIVATE_LIBS ${_loc})
  endforeach()
  list(APPEND FT_PRIVATE_LIBS ${FT_NVRTC_LIB})
endif()
list(REMOVE_DUPLICATES FT_PRIVATE_LIBS)
list(APPEND FT_PRIVATE_LIBS pthread m dl)

# pkg-config: the prefix is found from the .pc file's own place, so the prefix can move.
# flaretune.pc links the shared library (which records its own dependencies and where they
# are); flaretune-static.pc links libflaretune.a with what it needs. A library in a folder the
# linker searches anyway is named by -l alone; one elsewhere (OpenBLAS's OpenMP build, the CUDA
# toolkit) by a folder found here, kept in a variable of the .pc file (pkg-config
# --define-variable=cuda_libdir=DIR moves it) with an rpath to it, as libflaretune.so has: no
# file's path is written in.
file(RELATIVE_PATH FT_PC_UP /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
set(_ft_pc_sysdirs ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES})
set(FT_PC_VARS "")
set(FT_PC_STATIC_LIBS "")
set(_ft_pc_dirs "")
set(_ft_pc_dir_vars "")
foreach(l ${FT_PRIVATE_LIBS})
  if(NOT IS_ABSOLUTE ${l})
    string(APPEND FT_PC_STATIC_LIBS " -l${l}")
    continue()
  endif()
  get_filename_component(_dir ${l} DIRECTORY)
  get_filename_component(_name ${l} NAME)
  string(REGEX REPLACE "^lib" "" _name ${_name})
  string(REGEX REPLACE "\\.(so|a)(\\..*)?$" "" _name ${_name})
  list(FIND _ft_pc_sysdirs ${_dir} _sys)
  if(_sys GREATER -1)
    string(APPEND FT_PC_STATIC_LIBS " -l${_name}")
    continue()
  endif()
  list(FIND _ft_pc_dirs ${_dir} _known)
  if(_known GREATER -1)
    list(GET _ft_pc_dir_vars ${_known} _var)
  else()
    if(_name MATCHES "^(cu|nvrtc)")
      set(_var cuda_libdir)
    else()
      set(_var ${_name}_libdir)
    endif()
    list(FIND _ft_pc_dir_vars ${_var} _taken)
    if(_taken GREATER -1)
      list(LENGTH _ft_pc_dirs _n)
      set(_var ${_var}_${_n})
    endif()
    list(APPEND _ft_pc_dirs ${_dir})
    list(APPEND _ft_pc_dir_vars ${_var})
    string(APPEND FT_PC_VARS "${_var}=${_dir}\n")
    string(APPEND FT_PC_STATIC_LIBS " -L\${${_var}} -Wl,-rpath,\${${_var}}")
  endif()
  string(APPEND FT_PC_STATIC_LIBS " -l${_name}")
endforeach()
foreach(pc flaretune flaretune-static)
  configure_file(cmake/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

set(FT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flaretune)
set(FT_SONAME libflaretune.so.${PROJECT_VERSION_MAJOR})
configure_package_config_file(cmake/flaretune-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/flaretune-config.cmake INSTALL_DESTINATION ${FT_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/flaretune-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/flaretune-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/flaretune-config-version.cmake
        DESTINATION ${FT_CMAKE_DIR})

# The manual page: the --help text through help2man (Debian: help2man), when it is here.
find_program(FT_HELP2MAN help2man)
if(FT_HELP2MAN)
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/flaretune.1
    COMMAND ${FT_HELP2MAN} --no-info --no-discard-stderr --section 1
            --name "autotune and profile the kernels of block-diffusion drafters"
            --include ${CMAKE_CURRENT_SOURCE_DIR}/cmake/flaretune.h2m
            --output ${CMAKE_CURRENT_BINARY_DIR}/flaretune.1 $<TARGET_FILE:flaretune>
    DEPENDS flaretune ${CMAKE_CURRENT_SOURCE_DIR}/cmake/flaretune.h2m
    COMMENT "Writing the manual page (help2man)")
  add_custom_target(flaretune_man ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/flaretune.1)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/flaretune.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "flaretune: help2man not found: no manual page (apt-get install help2man)")
endif()
