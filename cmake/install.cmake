# `cmake --install build --prefix P`: the libraries, the tapegrad command, each layer's headers under an
# include root of its own (see tapegrad_layer), and a CMake package, so that an outside project writes
# find_package(tapegrad) and links tapegrad::autograd, ::nn, ::optim, ::train (or one of its concerns, ::train_io
# and the others) or ::cli with the same
# layering as here. scripts/check_installed_project.sh proves it on every `make test`.
include(CMakePackageConfigHelpers)

get_property(layers GLOBAL PROPERTY TAPEGRAD_LAYERS)
foreach(layer ${layers})
  get_property(dir GLOBAL PROPERTY TAPEGRAD_LAYER_DIR_${layer})
  # A folder holding layers of its own (train's root: its concerns; train/parallel: the MPI launcher, which
  # is the command line's own) installs only its own headers; cli.h goes with tapegrad::cli below.
  set(subfolders)
  file(GLOB entries LIST_DIRECTORIES true ${PROJECT_SOURCE_DIR}/${dir}/*)
  foreach(entry ${entries})
    if(IS_DIRECTORY ${entry} AND NOT layer MATCHES "^(autograd|nn|optim)$")
      get_filename_component(entry_name ${entry} NAME)
      list(APPEND subfolders PATTERN ${entry_name} EXCLUDE)
    endif()
  endforeach()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tapegrad/${layer}/${dir}
          FILES_MATCHING PATTERN "*.h" ${subfolders})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/train/cli/cli.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tapegrad/cli/train/cli)

list(TRANSFORM layers PREPEND tapegrad_ OUTPUT_VARIABLE layer_targets)
install(TARGETS ${layer_targets} tapegrad_mpi tapegrad_cli
        EXPORT tapegradTargets)
install(TARGETS tapegrad)

set(package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tapegrad)
install(EXPORT tapegradTargets NAMESPACE tapegrad:: DESTINATION ${package_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/tapegradConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/tapegradConfig.cmake INSTALL_DESTINATION ${package_dir})
# Before 1.0 a minor version may break the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tapegradConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tapegradConfig.cmake ${PROJECT_BINARY_DIR}/tapegradConfigVersion.cmake
        DESTINATION ${package_dir})
