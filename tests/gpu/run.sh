#!/bin/sh
# run.sh: the checks that need a real GPU (make test-gpu). CI never runs them: they need
# libcuda.so.1 and a device. Exit status 77 (skip) when there is no driver.
set -eu
BUILD=${BUILD:-build}
exec "$BUILD/tests/gpu/check_kernels"
