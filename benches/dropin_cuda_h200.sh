#!/usr/bin/env bash
# The drop-in on the GPU machine: the official onnxruntime-genai-cuda 0.18 Python package running
# on genai-bridge's library built with `--features cuda`, routed (automatically, from the models'
# cuda provider) to the native CUDA decoder; its greedy sequences must equal
# `genai-bridge generate --backend native --device cuda` on the same folders. Expects:
#   carry/og/onnxruntime_genai/   the official package's Python files and extension (0.18.0, cp312)
#                                 with genai-bridge's library as libonnxruntime-genai.so beside them:
#                                 cargo build --release -p genai-capi --features cuda
#                                 cp target/release/libonnxruntime_genai.so carry/og/onnxruntime_genai/libonnxruntime-genai.so
#   $BIN (carry/cuda/genai-bridge)
#   OUT=$OUT bash benches/dropin_cuda_h200.sh MODEL_DIR...
set -uo pipefail
cd "$(dirname "$0")/.."
. benches/h200_env.sh
out="${OUT:-dropin-out}" bin="${BIN:-carry/cuda/genai-bridge}"
mkdir -p "$out"
prompt=1,2,3,4,5,6,7,8 max=40 status=0
GENAI_BRIDGE_LOG=1 PYTHONPATH="$PWD/carry/og${PYTHONPATH:+:$PYTHONPATH}" timeout 300 \
    python3 crates/capi/tests/dropin/cuda_route.py --prompt-ids $prompt --max-length $max "$@" \
    >"$out/dropin.jsonl" 2>"$out/dropin.err" || { echo "drop-in run failed"; tail -5 "$out/dropin.err"; status=1; }
for dir in "$@"; do
    got=$(python3 -c "import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l)
    if d['model_dir']==sys.argv[2]: print(d['sequence'])" "$out/dropin.jsonl" "$dir")
    want=$(timeout 120 "$bin" generate "$dir" --backend native --device cuda --prompt-ids $prompt \
        --max-length $max --json 2>>"$out/cli.err" | python3 -c "import json,sys; print(json.load(sys.stdin)['sequence'])")
    routed=$(grep -c "native decoder on cuda" "$out/dropin.err")
    if [[ -n "$got" && "$got" == "$want" ]]; then verdict=SAME; else verdict=DIFFER; status=1; fi
    echo "$dir: $verdict (official package: ${got:-none}; CLI: ${want:-none})"
done
echo "library log lines routing to the native CUDA decoder: $routed of $#"
[[ $routed == "$#" ]] || status=1
grep -m3 "genai-bridge:" "$out/dropin.err" | cut -c1-300
exit $status
