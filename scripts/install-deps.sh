#!/usr/bin/env bash
# Installs everything memfit needs to build, test and train, from Debian 12's packages.
set -euo pipefail
packages=(
  cmake g++ make            # the build
  libdnnl-dev               # oneDNN: the CPU backend's kernels
  ocl-icd-opencl-dev        # OpenCL headers: oneDNN's CMake config looks for them
  zlib1g-dev                # reading the gzipped Fashion-MNIST files
  libzip-dev                # reading users' .npz archives of numpy arrays
  libcli11-dev              # the command line
  libgtest-dev              # the tests
  nlohmann-json3-dev        # JSON reading in the tests
  coinor-libcbc-dev         # CBC: the MILP solver of --recompute milp (optional)
  pkg-config                # how CMake finds libzip and CBC
  clang libclang-rt-14-dev  # libFuzzer: the fuzz targets of the readers (fuzz/)
  libopenmpi-dev openmpi-bin  # MPI: data-parallel training across processes and machines
  iproute2                  # ip netns: the two-host data-parallel test
  libonnx-dev libprotobuf-dev  # ONNX: users' models in (--onnx) and trained ones out (--save-onnx)
  python3-dev pybind11-dev  # the Python module memfit (python/): its headers and binding
  python3-venv python3-numpy python3-pytest  # pip install . into a virtual environment, and its tests
  dataset-fashion-mnist     # the data set, in /usr/share/datasets/fashion-mnist
)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "installed: ${packages[*]}" | tr -s ' '
