#!/usr/bin/env bash
# Installs what numaff needs to build and test on Debian 12 (run as root). Idempotent and quick
# when everything is already there: apt runs only for missing packages.
set -euo pipefail

# qemu-system-x86 and busybox-static: the multi-node QEMU guests of the test suite (crates/testvm);
# their guest kernel comes from apt at test time (cached under target/testvm).
# chromium: the test that renders `numaff analyze --html` reports headless.
# python3-pip: pyarrow, with which a test reads a written trace as other tools do.
packages=(build-essential pkg-config libhwloc-dev hwloc-nox libudev-dev qemu-system-x86 busybox-static
  chromium python3 python3-pip)

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
