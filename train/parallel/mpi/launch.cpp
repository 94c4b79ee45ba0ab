#include "train/parallel/mpi/launch.h"

#include <cstdlib>
#include <string>

namespace tapegrad {

namespace {

int environment_number(const char* name, int otherwise) {
  const char* value = std::getenv(name);
  if (!value || !*value) return otherwise;
  char* end = nullptr;
  const long number = std::strtol(value, &end, 10);
  return *end == '\0' && number >= 0 && number < (1 << 30) ? static_cast<int>(number) : otherwise;
}

}  // namespace

Launch launch_from_environment() {
  for (const auto& [rank, size] :
       {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"PMI_RANK", "PMI_SIZE"}}) {
    const int ranks = environment_number(size, 0);
    if (ranks > 0) return {environment_number(rank, 0), ranks};
  }
  return {};
}

}  // namespace tapegrad
