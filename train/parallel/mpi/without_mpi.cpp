// The build without MPI (CMake's find_package(MPI) found none): a one-process tapegrad.
#include "train/parallel/mpi/launch.h"

namespace tapegrad {

bool built_with_mpi() { return false; }

std::unique_ptr<Communicator> connect_ranks(double) {
  const Launch launch = launch_from_environment();
  throw ValueError(cat("mpirun started this process as rank ", launch.rank, " of ", launch.ranks,
                       ", but this tapegrad was built without MPI: install libopenmpi-dev and openmpi-bin, then "
                       "build again (CMake finds MPI when it is installed)"));
}

}  // namespace tapegrad
