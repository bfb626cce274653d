#!/usr/bin/env bash
# Runs one fuzz target: fuzz/run.sh TARGET SECONDS [extra libFuzzer flags...]
# Installs the pinned cargo-fuzz if it is missing; needs a nightly toolchain (rustup).
# New corpus entries go to fuzz/work/corpus/TARGET (ignored by git); the committed seeds in
# fuzz/corpus/TARGET are read but never written. Findings land in fuzz/artifacts/TARGET.
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.1
target=${1:?usage: fuzz/run.sh TARGET SECONDS [libFuzzer flags...]}
seconds=${2:?usage: fuzz/run.sh TARGET SECONDS [libFuzzer flags...]}
shift 2

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

# Per-target limits: memory in MB, seconds per input.
rss_limit_mb=2048
timeout=10
case "$target" in
    # The library allocates caller-requested tensors up to 16 GiB (lazily zeroed memory, see
    # MAX_OWNED_BYTES in crates/capi/src/tensor.rs): allow single allocations up to that.
    capi_calls) timeout=20; set -- -malloc_limit_mb=16400 "$@" ;;
esac

# The fuzz build needs no ONNX Runtime download (the C ABI target runs the native decoder).
export GENAI_BRIDGE_NO_ORT_DOWNLOAD=1

mkdir -p "work/corpus/$target" "artifacts/$target"
exec cargo +nightly fuzz run "$target" "work/corpus/$target" "corpus/$target" -- \
    -max_total_time="$seconds" -rss_limit_mb="$rss_limit_mb" -timeout="$timeout" \
    -print_final_stats=1 "$@"
