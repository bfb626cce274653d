#!/usr/bin/env bash
# Installs the pinned NVRTC library (PyPI wheel nvidia-cuda-nvrtc, CUDA 13.0) into
# target/nvrtc/<version>/ after checking the wheel's sha256, and prints the folder holding
# libnvrtc.so.13. NVRTC compiles the CUDA kernels with no GPU or driver, so CI checks every
# kernel source with it. Idempotent: an installed copy is reused.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=13.0.88
WHEEL=nvidia_cuda_nvrtc-13.0.88-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl
SHA256=ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575

dest="target/nvrtc/$VERSION"
lib="$dest/nvidia/cu13/lib"
if [[ -f "$lib/libnvrtc.so.13" ]]; then
    echo "$PWD/$lib"
    exit 0
fi
mkdir -p "$dest/download"
python3 -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_12_x86_64 --platform manylinux2010_x86_64 --python-version 3.12 \
    -d "$dest/download" "nvidia-cuda-nvrtc==$VERSION" >&2
echo "$SHA256  $dest/download/$WHEEL" | sha256sum --check --quiet - >&2
python3 - "$dest/download/$WHEEL" "$dest" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.startswith("nvidia/cu13/lib/") and ".alt." not in name:
            z.extract(name, sys.argv[2])
PY
rm -rf "$dest/download"
echo "$PWD/$lib"
