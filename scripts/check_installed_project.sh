#!/bin/sh
# Usage: check_installed_project.sh <build dir> <project source dir> <work dir>
# Installs the tapegrad build into a fresh prefix under <work dir>, configures the outside CMake project with
# -DCMAKE_PREFIX_PATH=<prefix> (and the build's compiler and build type, so an ASan build is consumed by the
# same compiler and runtime), builds it and runs its own ctest. Exits non-zero naming the step that failed.
# Only <work dir>/prefix and <work dir>/build are ever removed.
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 <build dir> <project source dir> <work dir>" >&2
  exit 2
fi
build=$1
project=$2
work=$3
prefix=$work/prefix
project_build=$work/build

fail() {
  echo "check_installed_project: FAILED at step '$1' ($project against $build installed in $prefix)" >&2
  exit 1
}
step() {
  name=$1
  shift
  echo "== $name: $*"
  "$@" || fail "$name"
}

cache_value() {  # the value of a variable in the build's CMakeCache.txt
  sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"
}
[ -f "$build/CMakeCache.txt" ] || { echo "$build is not a configured CMake build tree" >&2; fail "read the build"; }
compiler=$(cache_value CMAKE_CXX_COMPILER)
build_type=$(cache_value CMAKE_BUILD_TYPE)

rm -rf "$prefix" "$project_build" || fail "clean the work directory"
mkdir -p "$work" || fail "create the work directory"
step install cmake --install "$build" --prefix "$prefix"
step configure cmake -S "$project" -B "$project_build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_BUILD_TYPE="$build_type"
step build cmake --build "$project_build" -j2
step ctest ctest --test-dir "$project_build" --output-on-failure
echo "check_installed_project: $project builds and passes its tests against the installed tapegrad"
