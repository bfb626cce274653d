#!/usr/bin/env bash
# The cuda-sampling branch on the H200 machine in one call (under 5 minutes): per-kernel checks
# (including the device token choice against the host's at vocab 32000/151936/128256, bitwise
# repeatable), the device-vs-host choice end to end on every fixture (seeded sampled and greedy
# generations must give identical tokens), CUDA vs CPU parity (the step graph lost its argmax),
# and `genai-bridge bench` on the CUDA fixtures with the device choice on and off
# (GENAI_BRIDGE_DEVICE_SAMPLING). Logs go to $OUT (or ./sampling-check-out).
#
# Build here (the GPU machine has no Rust), from the repository root, then copy into carry/cuda/:
#   export CARGO_TARGET_DIR=<this worktree>/target
#   cargo build --release --features cuda -p genai-bridge
#   cargo test --release -p genai-backend-native --features cuda --no-run
#   mkdir -p carry/cuda
#   cp "$CARGO_TARGET_DIR/release/genai-bridge" carry/cuda/
#   for t in cuda_kernels cuda_parity cuda_sampling; do
#     cp "$(ls -t "$CARGO_TARGET_DIR"/release/deps/$t-* | grep -v '\.d$' | head -1)" carry/cuda/$t
#   done
# and pass carry: ["carry"] to the run.
set -uo pipefail
cd "$(dirname "$0")/../../.."
out="${OUT:-sampling-check-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GENAI_BRIDGE_KERNEL_CACHE=/tmp/genai-kernels
bin=carry/cuda
start=$SECONDS
status=0
for b in genai-bridge cuda_kernels cuda_parity cuda_sampling; do
    [[ -x "$bin/$b" ]] || { echo "missing $bin/$b (see the header for how to build it)"; exit 2; }
done
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv | tee "$out/gpu.txt"

# 1. Every kernel against the CPU kernels; "choice ..." lines: device vs host token choice.
timeout 150 "$bin/cuda_kernels" --nocapture >"$out/kernels.log" 2>&1 || status=1
echo "kernels: $(grep -c ' ok$' "$out/kernels.log") ok, $(grep -c FAIL "$out/kernels.log") FAIL"
grep -E "FAIL|panicked|^sample vocab" "$out/kernels.log" | head -20
grep -E "^choice" "$out/kernels.log" | head -60

# 2. Device choice vs host choice, seeded generations on every fixture.
GENAI_FIXTURES="$PWD/models/fixtures" timeout 60 "$bin/cuda_sampling" --nocapture \
    >"$out/sampling.log" 2>&1 || status=1
grep -E "search|test result|FAILED|panicked|NOT RUN" "$out/sampling.log" | head -80

# 3. Parity against the CPU decoder (graph vs eager, rewind).
GENAI_FIXTURES="$PWD/models/fixtures" GENAI_PARITY_OUT="$out/parity.jsonl" \
    timeout 90 "$bin/cuda_parity" --test-threads=1 >"$out/parity.log" 2>&1 || status=1
grep -E "test result|FAILED|panicked" "$out/parity.log" | head -10

# 4. Bench on the CUDA fixtures, device choice on and off (greedy: the bench's search).
for dir in models/fixtures/*-cuda/; do
    for choice in 1 0; do
        [[ $((SECONDS - start)) -lt 270 ]] || break 2
        echo "device choice $choice: $dir"
        GENAI_BRIDGE_DEVICE_SAMPLING=$choice timeout 30 "$bin/genai-bridge" bench "$dir" \
            --backend native --device cuda --prompt-tokens 64 --decode-tokens 128 --runs 2 \
            --json 2>&1 | tee -a "$out/bench.jsonl" | cut -c1-300
    done
done
# 5. The CLI end to end: a seeded sampled generation, device choice on and off, same output.
dir=$(ls -d models/fixtures/*-cuda/ | head -1)
for choice in 1 0; do
    GENAI_BRIDGE_DEVICE_SAMPLING=$choice timeout 30 "$bin/genai-bridge" generate "$dir" \
        --backend native --device cuda --prompt-ids 1,2,3,4,5 --max-new-tokens 48 --do-sample \
        --top-k 40 --top-p 0.9 --temperature 0.8 --repetition-penalty 1.1 --seed 5 --json \
        >"$out/generate-$choice.json" 2>&1
done
python3 - "$out/generate-1.json" "$out/generate-0.json" <<'PY' || status=1
import json, sys
a, b = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:])
key = next((k for k in ("token_ids", "tokens", "sequence", "text") if k in a), None)
same = key is not None and a[key] == b[key]
speed = [x.get("timings", {}).get("decode_tokens_per_s") for x in (a, b)]
print(f"cli sampled generate, device choice on vs off ({key}): {'identical' if same else 'DIFFER'}; "
      f"decode tok/s on {speed[0]}, off {speed[1]}")
sys.exit(0 if same else 1)
PY
echo "done in $((SECONDS - start)) s, status $status; logs in $out"
exit $status
