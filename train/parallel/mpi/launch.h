#pragma once
// Data-parallel runs: how `mpirun -np N tapegrad train ...` becomes N ranks of one run. The command line
// asks here whether mpirun started this process and, when it did, connects the ranks over MPI. Built
// without MPI (CMake found none), connecting is refused with what to install, so that N copies of a
// one-process trainer never write into the same run directory.
#include <memory>

#include "train/parallel/communicator.h"

namespace tapegrad {

/// How mpirun started this process, from the environment it sets (OpenMPI's OMPI_COMM_WORLD_RANK and
/// OMPI_COMM_WORLD_SIZE; MPICH's PMI_RANK and PMI_SIZE): rank 0 of 1 when it did not.
struct Launch {
  int rank = 0;
  int ranks = 1;
};
Launch launch_from_environment();

/// Whether this tapegrad was built with MPI.
bool built_with_mpi();

/// The communicator of the ranks mpirun started (MPI_Init now, MPI_Finalize when it goes; one per process).
/// A collective that waits longer than timeout_seconds for the other ranks is a CommunicationError. Built
/// without MPI: a ValueError saying so and what to install.
std::unique_ptr<Communicator> connect_ranks(double timeout_seconds);

}  // namespace tapegrad
