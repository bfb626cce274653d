#!/usr/bin/env bash
# Prepares what the H200 machine needs from this one (it has no Rust and no network), under
# carry/ (ignored by git; the `run` tool's carry names these folders):
#   carry/bin.tar.xz   genai-bridge, cuda_kernels, cuda_parity, cuda_sampling, cuda_paging,
#                      cuda_gemv and cuda_step from this tree, built now (release, `cuda`; the tests and benches with `lab`),
#                      stripped; unpack there with `tar xJf carry/bin.tar.xz -C DIR` (DIR/bin/)
#   carry/bench/site/onnxruntime_genai/  the model builder of onnxruntime-genai 0.18.0 (the
#                      wheel's onnxruntime_genai/models folder, sha256-checked, and an
#                      __init__.py holding only the wheel's version, so the builder imports
#                      without the native extension), as
#                      benches/decode_h200.sh and models/make_bench_models.py expect it
# Prints the binaries' build times and the commit they were built from (a dirty tree says so),
# so a stale binary cannot be carried unnoticed. The ONNX Runtime GPU parts are made apart
# (../shared/tools/ort-gpu-parts.sh; benches/decode_h200.sh says how they travel).
#
#   bash benches/carry_h200.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL=onnxruntime_genai-0.18.0-cp312-cp312-manylinux_2_28_x86_64.whl
WHEEL_SHA256=6df22d9d74a86409cf06f6af0045b999524941426dab6eba4f937ef2aed513a7

if [[ "${1:-}" != --no-build ]]; then
    touch crates/cli/build.rs  # the CLI's build stamp names the commit
    cargo build --release --features cuda -p genai-bridge
    cargo test --release -p genai-backend-native --features lab --no-run
    cargo bench -p genai-backend-native --features lab --bench cuda_gemv --bench cuda_step --no-run
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" carry
cp -p target/release/genai-bridge "$stage/bin/"
for t in cuda_kernels cuda_parity cuda_sampling cuda_paging cuda_gemv cuda_step; do
    newest=$(ls -t target/release/deps/"$t"-* 2>/dev/null | grep -v '\.d$' | head -1 || true)
    [[ -n "$newest" ]] || { echo "no $t binary: build it first" >&2; exit 1; }
    cp -p "$newest" "$stage/bin/$t"
done
stale=0
for f in "$stage"/bin/*; do
    # A source file (kernels are compiled into the binaries) newer than the binary: stale.
    # (crates/cli/build.rs is touched above only to restamp the CLI: not a change.)
    newer=$(find crates kernels -type f \( -name '*.rs' -o -name '*.cu' -o -name '*.cuh' \
        -o -name Cargo.toml \) -not -path crates/cli/build.rs -newer "$f" | head -1)
    printf '%-14s built %s%s\n' "$(basename "$f")" "$(date -r "$f" '+%F %T')" \
        "${newer:+   STALE: $newer is newer}"
    [[ -z "$newer" ]] || stale=1
done
[[ $stale == 0 ]] || { echo "stale binaries: build without --no-build" >&2; exit 1; }
strip "$stage"/bin/*
tar cJf carry/bin.tar.xz -C "$stage" bin
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- . ':!carry' || commit+=" + uncommitted changes"
echo "carry/bin.tar.xz: $(du -h carry/bin.tar.xz | cut -f1), built from $commit"

site=carry/bench/site
if [[ ! -f "$site/onnxruntime_genai/models/builder.py" ]]; then
    mkdir -p carry/download "$site/onnxruntime_genai"
    [[ -f "carry/download/$WHEEL" ]] || python3 -m pip download --quiet --no-deps \
        --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
        -d carry/download onnxruntime-genai==0.18.0
    echo "$WHEEL_SHA256  carry/download/$WHEEL" | sha256sum --check --quiet -
    python3 - "carry/download/$WHEEL" "$site" <<'PY'
import sys, zipfile
wheel, site = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("onnxruntime_genai/models/"):
            z.extract(name, site)
PY
    echo "__version__ = \"${WHEEL#onnxruntime_genai-}\"" | sed 's/-cp.*"/"/' \
        >"$site/onnxruntime_genai/__init__.py"
fi
echo "$site: $(du -sh "$site" | cut -f1)"
