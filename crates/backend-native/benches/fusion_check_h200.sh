#!/usr/bin/env bash
# The cuda-fusion branch on the H200 machine in one call (about 5 minutes at most): per-kernel
# checks against the CPU kernels (including the fused decode attention at many lengths), CUDA vs
# CPU parity on every fixture, `genai-bridge bench` on the CUDA fixtures, and (when the builder
# package is carried) the Qwen2.5-1.5B fp16 shape, graph on, with a per-kernel profile if ncu
# is there. Logs go to $OUT (or ./fusion-check-out).
#
# Build here (the GPU machine has no Rust), from the repository root, then copy into carry/cuda/:
#   export CARGO_TARGET_DIR=<this worktree>/target
#   cargo build --release --features cuda -p genai-bridge
#   cargo test --release -p genai-backend-native --features cuda --no-run
#   mkdir -p carry/cuda
#   cp "$CARGO_TARGET_DIR/release/genai-bridge" carry/cuda/
#   cp "$(ls -t "$CARGO_TARGET_DIR"/release/deps/cuda_kernels-* | grep -v '\.d$' | head -1)" carry/cuda/cuda_kernels
#   cp "$(ls -t "$CARGO_TARGET_DIR"/release/deps/cuda_parity-* | grep -v '\.d$' | head -1)" carry/cuda/cuda_parity
# Optional, for the 1.5B bench: the builder package of onnxruntime-genai 0.18 (its
# onnxruntime_genai/models folder with an __init__.py stub) under carry/bench/site, as for
# cuda_h200.sh. SKIP_BIG=1 skips that part; PROFILE=0 skips the ncu profile.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out="${OUT:-fusion-check-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GENAI_BRIDGE_KERNEL_CACHE=/tmp/genai-kernels HF_HUB_OFFLINE=1
export PYTHONPATH="$PWD/carry/bench/site${PYTHONPATH:+:$PYTHONPATH}"
bin=carry/cuda
start=$SECONDS
for b in genai-bridge cuda_kernels cuda_parity; do
    [[ -x "$bin/$b" ]] || { echo "missing $bin/$b (see the header for how to build it)"; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm --format=csv | tee "$out/gpu.txt"

# 1. Every kernel against the CPU kernels; decode attention runs each case twice (bitwise).
timeout 120 "$bin/cuda_kernels" --nocapture >"$out/kernels.log" 2>&1
echo "kernels: exit $?, $(grep -c ' ok$' "$out/kernels.log") ok, $(grep -c FAIL "$out/kernels.log") FAIL"
grep -E "FAIL|panicked" "$out/kernels.log" | head -20
grep -E "^decode attention 12/2 heads hs128 n(256|2000)" "$out/kernels.log" | head -4

# 2. Parity against the CPU decoder on every fixture (graph vs eager, rewind inside).
GENAI_FIXTURES="$PWD/models/fixtures" GENAI_PARITY_OUT="$out/parity.jsonl" \
    timeout 150 "$bin/cuda_parity" --test-threads=1 >"$out/parity.log" 2>&1
echo "parity: exit $?"
grep -E "test result|FAILED|panicked" "$out/parity.log" | head -10

# 3. Bench on the CUDA fixtures (tiny: launch and latency bound), graph on and off.
for dir in models/fixtures/*-cuda/; do
    for graph in 1 0; do
        GENAI_BRIDGE_CUDA_GRAPH=$graph timeout 60 "$bin/genai-bridge" bench "$dir" \
            --backend native --device cuda --prompt-tokens 64 --decode-tokens 128 --runs 2 \
            --json 2>&1 | tee -a "$out/bench-fixtures.jsonl" | cut -c1-300
    done
done

# 4. The 1.5B fp16 shape (issue 5's target), when the builder is carried and time is left.
models=/tmp/bench-models
if [[ "${SKIP_BIG:-0}" != 1 && -d carry/bench/site && $((SECONDS - start)) -lt 150 ]]; then
    timeout 120 python3 models/make_bench_models.py --shape qwen2.5-1.5b --precision fp16 \
        --ep cuda --device cuda --out "$models" >"$out/make.log" 2>&1
    tail -1 "$out/make.log" | cut -c1-200
    dir="$models/qwen2.5-1.5b-fp16-cuda"
    if [[ -f "$dir/genai_config.json" ]]; then
        GENAI_BRIDGE_CUDA_GRAPH=1 timeout 60 "$bin/genai-bridge" bench "$dir" --backend native \
            --device cuda --prompt-tokens 128 --decode-tokens 256 --runs 2 --json 2>&1 |
            tee -a "$out/bench-1.5b.jsonl" | cut -c1-400
        ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        if [[ "${PROFILE:-1}" != 0 && -n "$ncu" && $((SECONDS - start)) -lt 240 ]]; then
            GENAI_BRIDGE_CUDA_GRAPH=0 timeout 50 "$ncu" --clock-control none \
                --metrics gpu__time_duration.sum --launch-skip 3000 --launch-count 400 --csv \
                "$bin/genai-bridge" bench "$dir" --backend native --device cuda \
                --prompt-tokens 128 --decode-tokens 16 --runs 1 --json \
                >"$out/ncu.csv" 2>"$out/ncu.err"
            python3 crates/backend-native/benches/ncu_summary.py "$out/ncu.csv"
        fi
    fi
fi
echo "done in $((SECONDS - start)) s; logs in $out"
