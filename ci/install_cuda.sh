#!/usr/bin/env bash
# Install the CUDA 13 compiler and runtime headers into a manylinux_2_28 (AlmaLinux 8)
# container: cibuildwheel's before-all for the packboost-cu13 wheels
# (ci/cibuildwheel-cu13.toml). Only what the build needs -- nvcc, the static cudart and
# the headers; no driver: the wheel must not contain libcuda (auditwheel --exclude
# libcuda.so.1), the user's driver provides it.
set -euo pipefail
CUDA_VERSION="${CUDA_VERSION:-13-0}"
case "$(uname -m)" in
    x86_64) repo_arch=x86_64 ;;
    aarch64) repo_arch=sbsa ;;
    *) echo "install_cuda: no CUDA repository for $(uname -m)" >&2; exit 1 ;;
esac
dnf install -y dnf-plugins-core
dnf config-manager --add-repo \
    "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/${repo_arch}/cuda-rhel8.repo"
# cuda/*.cu include only cuda_runtime.h: the compiler and cudart (static) suffice.
dnf install -y "cuda-nvcc-${CUDA_VERSION}" "cuda-cudart-devel-${CUDA_VERSION}"
/usr/local/cuda/bin/nvcc --version
