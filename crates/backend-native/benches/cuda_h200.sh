#!/usr/bin/env bash
# The native CUDA decoder on a GPU machine, in one call: per-kernel checks against the CPU
# kernels, CUDA vs CPU parity on every fixture, route/generate through the CLI, then
# random-weight models of real shapes made with the official builder and `genai-bridge bench`
# on each, graph on and off (GRAPH_MODES, default "1 0"). SHAPES is a space-separated list. Results go to $OUT (or ./cuda-bench-out).
#
# Expects, built elsewhere (the GPU machine has no Rust) and copied into carry/cuda/:
#   genai-bridge   cargo build --release --features cuda
#   cuda_parity, cuda_kernels   cargo test --release -p genai-backend-native --features cuda --no-run
# and the builder package of onnxruntime-genai 0.18 (its onnxruntime_genai/models folder, with
# an __init__.py stub) under carry/bench/site. SHAPES and PRECISIONS select the bench models.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out="${OUT:-cuda-bench-out}"
mkdir -p "$out"
. benches/h200_env.sh
bin=carry/cuda
nvidia-smi --query-gpu=name,driver_version,memory.used,clocks.sm --format=csv

if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
    "$bin/cuda_kernels" --nocapture 2>&1 | tee "$out/kernels.log" | grep -E "rel diff|test result|NOT RUN"
    GENAI_FIXTURES="$PWD/models/fixtures" GENAI_PARITY_OUT="$out/parity.jsonl" \
        "$bin/cuda_parity" --test-threads=1 >"$out/parity.log" 2>&1
    tail -3 "$out/parity.log"
    "$bin/genai-bridge" route models/fixtures/llama-fp16-cuda --json >"$out/route.json" 2>&1
    "$bin/genai-bridge" generate models/fixtures/llama-fp16-cuda --prompt-ids 1,2,3 \
        --max-new-tokens 16 --json >"$out/generate.json" 2>&1
    grep -o '"backend":"[a-z]*","device":"[a-z]*"' "$out/generate.json" | head -1
fi

models=/tmp/bench-models
python3 - <<'PY' 2>&1 | tail -1
import torch, time
n = 1 << 30
a = torch.empty(n, dtype=torch.float16, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(10): b.copy_(a)
torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 10
print(f"copy bandwidth {2 * n * 2 / dt / 1e9:.0f} GB/s")
PY
# One shape at a time: make its models, then bench them (graph on, then eager).
for shape in ${SHAPES:-qwen2.5-0.5b}; do
    python3 models/make_bench_models.py --shape "$shape" --precision "${PRECISIONS:-fp16}" \
        --ep cuda --device cuda --out "$models" >>"$out/make.log" 2>&1
    tail -1 "$out/make.log" | cut -c1-200
    for dir in "$models/$shape"-*/; do
        [[ -f "$dir/genai_config.json" ]] || continue
        for graph in ${GRAPH_MODES:-1 0}; do
            GENAI_BRIDGE_CUDA_GRAPH=$graph timeout 300 "$bin/genai-bridge" bench "$dir" \
                --backend native --device cuda --prompt-tokens 128 --decode-tokens 256 --runs 2 \
                --json 2>&1 | tee -a "$out/bench.jsonl" | cut -c1-400
        done
    done
done

# PROFILE=<model folder name>: per-kernel device time of eager decode steps under ncu.
if [[ -n "${PROFILE:-}" && -d "$models/$PROFILE" ]]; then
    ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    GENAI_BRIDGE_CUDA_GRAPH=0 timeout 240 "$ncu" --clock-control none \
        --metrics gpu__time_duration.sum --launch-skip "${PROFILE_SKIP:-3000}" \
        --launch-count "${PROFILE_COUNT:-800}" --csv \
        "$bin/genai-bridge" bench "$models/$PROFILE" --backend native --device cuda \
        --prompt-tokens 128 --decode-tokens 32 --runs 1 --json >"$out/ncu.csv" 2>"$out/ncu.err"
    python3 crates/backend-native/benches/ncu_summary.py "$out/ncu.csv"
fi
