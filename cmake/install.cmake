# `cmake --install build --prefix P`: the libraries, the tapegrad command, each layer's headers under an
# include root of its own (see tapegrad_layer), and a CMake package, so that an outside project writes
# find_package(tapegrad) and links tapegrad::autograd, ::nn, ::optim, ::train or ::cli with the same
# layering as here. scripts/check_installed_project.sh proves it on every `make test`.
include(CMakePackageConfigHelpers)

foreach(layer autograd nn optim train)
  # The command line's header goes with tapegrad::cli below, not with train; the MPI launcher is the
  # command line's own.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tapegrad/${layer}/${layer}
          FILES_MATCHING PATTERN "*.h" PATTERN "cli" EXCLUDE PATTERN "mpi" EXCLUDE)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/train/cli/cli.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tapegrad/cli/train/cli)

install(TARGETS tapegrad_autograd tapegrad_nn tapegrad_optim tapegrad_train tapegrad_mpi tapegrad_cli
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
