#!/usr/bin/env bash
# Installs tracer's build and test dependencies from Debian packages (run as root or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config \
  antlr4 libantlr4-runtime-dev \
  catch2 libopenblas-openmp-dev libcli11-dev nlohmann-json3-dev libfmt-dev libboost-graph-dev libgloo-dev \
  libdlpack-dev libedit-dev libgoogle-perftools-dev \
  clang libclang-rt-dev \
  >/dev/null
