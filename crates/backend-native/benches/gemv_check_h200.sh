#!/usr/bin/env bash
# The cuda-gemv branch (GEMV bandwidth: unrolled 16-byte weight loads, activations staged in
# shared memory, a new split per column) on the H200 machine in ONE call of at most ~9
# minutes: the per-kernel checks against the CPU kernels (every linear case twice, aligned and
# unaligned addresses, bitwise equal), CUDA vs CPU parity on every fixture, weight paging
# (bitwise equal to resident), then the Qwen2.5-1.5B and 0.5B fp16 shapes made with the
# builder and benched graph on, and an ncu per-kernel profile of eager 1.5B decode steps.
# Every stage has its own timeout and later stages are skipped when the time is short; logs
# and a summary go to $OUT (or ./gemv-check-out).
#
# Build here (the GPU machine has no Rust), from the repository root, then copy into carry/cuda/:
#   export CARGO_TARGET_DIR=<this worktree>/target
#   cargo build --release --features cuda -p genai-bridge
#   cargo test --release -p genai-backend-native --features cuda --no-run
#   mkdir -p carry/cuda
#   cp "$CARGO_TARGET_DIR/release/genai-bridge" carry/cuda/
#   for t in cuda_kernels cuda_parity cuda_paging; do
#       cp "$(ls -t "$CARGO_TARGET_DIR"/release/deps/$t-* | grep -v '\.d$' | head -1)" carry/cuda/$t
#   done
# and the builder package of onnxruntime-genai 0.18 (its onnxruntime_genai/models folder with an
# __init__.py stub) under carry/bench/site, as for cuda_h200.sh. SKIP_BIG=1 skips the models;
# PROFILE=0 skips ncu.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out="${OUT:-gemv-check-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GENAI_BRIDGE_KERNEL_CACHE=/tmp/genai-kernels HF_HUB_OFFLINE=1
export PYTHONPATH="$PWD/carry/bench/site${PYTHONPATH:+:$PYTHONPATH}"
export GENAI_FIXTURES="$PWD/models/fixtures"
bin=carry/cuda
start=$SECONDS
left() { echo $((530 - (SECONDS - start))); }
for b in genai-bridge cuda_kernels cuda_parity cuda_paging; do
    [[ -x "$bin/$b" ]] || { echo "missing $bin/$b (see the header for how to build it)"; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm --format=csv | tee "$out/gpu.txt"

# 1. Every kernel against the CPU kernels; each linear case twice (bitwise).
timeout 150 "$bin/cuda_kernels" --test-threads=1 --nocapture >"$out/kernels.log" 2>&1
echo "kernels: exit $?, $(grep -c ' ok$' "$out/kernels.log") ok, $(grep -c FAIL "$out/kernels.log") FAIL, $(($SECONDS - start)) s"
grep -E "FAIL|DIFFERENT|panicked" "$out/kernels.log" | head -20
grep -E "^(gemv_f16 m1 k(8960|4096|14336)|int4 m1 k8960)" "$out/kernels.log" | head -6

# 2. Parity against the CPU decoder on every fixture (graph vs eager, rewind inside).
GENAI_PARITY_OUT="$out/parity.jsonl" \
    timeout 150 "$bin/cuda_parity" --test-threads=1 >"$out/parity.log" 2>&1
echo "parity: exit $?, $(($SECONDS - start)) s"
grep -E "test result|FAILED|panicked" "$out/parity.log" | head -10

# 3. Weight paging: streamed logits bitwise equal to resident ones.
timeout 120 "$bin/cuda_paging" --test-threads=1 >"$out/paging.log" 2>&1
echo "paging: exit $?, $(($SECONDS - start)) s"
grep -E "test result|FAILED|panicked" "$out/paging.log" | head -10

# 4. The real shapes, graph on (issue 5's target: 1.5B fp16), then ncu on 1.5B.
models=/tmp/bench-models
if [[ "${SKIP_BIG:-0}" != 1 && -d carry/bench/site ]]; then
    for shape in qwen2.5-1.5b qwen2.5-0.5b; do
        [[ $(left) -gt 100 ]] || { echo "$shape: skipped, $(left) s left"; continue; }
        timeout 150 python3 models/make_bench_models.py --shape "$shape" --precision fp16 \
            --ep cuda --device cuda --out "$models" >>"$out/make.log" 2>&1
        tail -1 "$out/make.log" | cut -c1-200
        dir="$models/$shape-fp16-cuda"
        [[ -f "$dir/genai_config.json" ]] || continue
        GENAI_BRIDGE_CUDA_GRAPH=1 timeout 60 "$bin/genai-bridge" bench "$dir" --backend native \
            --device cuda --prompt-tokens 128 --decode-tokens 256 --runs 2 --json 2>&1 |
            tee -a "$out/bench.jsonl" | cut -c1-400
    done
    dir="$models/qwen2.5-1.5b-fp16-cuda"
    ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [[ "${PROFILE:-1}" != 0 && -n "$ncu" && -f "$dir/genai_config.json" && $(left) -gt 60 ]]; then
        GENAI_BRIDGE_CUDA_GRAPH=0 timeout 55 "$ncu" --clock-control none \
            --metrics gpu__time_duration.sum --launch-skip 3000 --launch-count 400 --csv \
            "$bin/genai-bridge" bench "$dir" --backend native --device cuda \
            --prompt-tokens 128 --decode-tokens 16 --runs 1 --json \
            >"$out/ncu.csv" 2>"$out/ncu.err"
        python3 crates/backend-native/benches/ncu_summary.py "$out/ncu.csv" | tee "$out/ncu.txt"
    fi
fi
echo "done in $((SECONDS - start)) s; logs in $out"
