#!/usr/bin/env bash
# Installs the pinned cuobjdump and nvdisasm (PyPI wheels nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm, CUDA 13.5) into target/sass-tools/<version>/ after checking each wheel's
# sha256, and prints the folder holding both programs. They disassemble the cubins NVRTC makes,
# with no GPU or driver (scripts/kernels/kernel_pdl.py). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=13.5.37
TAG=py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64
declare -A SHA256=(
    [nvidia_cuda_cuobjdump]=38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58
    [nvidia_cuda_nvdisasm]=d3fdbdd49fa53e2e4aacd3db8259d052bd2b049ececdcb69e92e083c6728e7ca
)

dest="target/sass-tools/$VERSION"
bin="$dest/nvidia/cu13/bin"
if [[ -x "$bin/cuobjdump" && -x "$bin/nvdisasm" ]]; then
    echo "$PWD/$bin"
    exit 0
fi
mkdir -p "$dest/download"
for name in "${!SHA256[@]}"; do
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --python-version 3.12 \
        -d "$dest/download" "${name//_/-}==$VERSION" >&2
    echo "${SHA256[$name]}  $dest/download/$name-$VERSION-$TAG.whl" | sha256sum --check --quiet - >&2
done
python3 - "$dest" "$dest"/download/*.whl <<'PY'
import os, sys, zipfile
dest = sys.argv[1]
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith("nvidia/cu13/bin/"):
                os.chmod(z.extract(name, dest), 0o755)
PY
rm -rf "$dest/download"
echo "$PWD/$bin"
