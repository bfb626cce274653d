#!/usr/bin/env bash
# A/B of genai-bridge's native CUDA decoder on the H200 machine: each variant (a name and the
# environment it runs under) on each bench model, alternating within a round, several rounds in
# one warm machine, so the variants share the machine's state. One JSON line per run (the
# `bench --json` line plus call, variant, env and round) in $OUT/ab.jsonl; a summary on stdout.
#
#   OUT=$OUT CALL=2 bash benches/ab_h200.sh ROUNDS "MODEL..." "VARIANT..."
#     MODEL    a folder name under $MODELS_DIR (default /tmp/bench-models), e.g.
#              qwen2.5-0.5b-fp16-cuda (made by models/make_bench_models.py, or decode_h200.sh)
#     VARIANT  NAME:ENV=VALUE,ENV=VALUE  (NAME: alone for no variables), e.g.
#              "base: nopdl:GENAI_BRIDGE_PDL=0 onewave:GENAI_BRIDGE_DECODE_GEMV=onewave";
#              a '+' in a value stands for a space, for several NVRTC defines:
#              "pipe:GENAI_BRIDGE_NVRTC_DEFINES=I4M_PIPE=1+I4M_ROUND=2";
#              BIN=PATH in a variant runs that binary instead (an older build side by side)
# Environment: BIN (carry/cuda/genai-bridge), PROMPT_TOKENS (128), DECODE_TOKENS (256), RUNS (2),
# LIMIT_S (150, per run), and the usual LD_LIBRARY_PATH / GENAI_BRIDGE_KERNEL_CACHE.
set -uo pipefail
cd "$(dirname "$0")/.."
[[ $# == 3 ]] || { sed -n 2,16p "$0"; exit 2; }
rounds=$1 models=$2 variants=$3
OUT="${OUT:-ab-out}"
mkdir -p "$OUT"
BIN="${BIN:-carry/cuda/genai-bridge}" MODELS="${MODELS_DIR:-/tmp/bench-models}"
for r in $(seq 1 "$rounds"); do
    for model in $models; do
        for v in $variants; do
            name=${v%%:*} envs=${v#*:}
            IFS=, read -ra words <<<"$envs"
            words=("${words[@]//+/ }")
            envs="${words[*]}"
            bin=$BIN vars=()
            for w in "${words[@]}"; do
                if [[ $w == BIN=* ]]; then bin=${w#BIN=}; else vars+=("$w"); fi
            done
            dir="$MODELS/$model"
            [[ -f "$dir/genai_config.json" ]] || { echo "no model at $dir"; continue; }
            env "${vars[@]}" timeout "${LIMIT_S:-150}" "$bin" bench "$dir" --backend native --device cuda \
                --prompt-tokens "${PROMPT_TOKENS:-128}" --decode-tokens "${DECODE_TOKENS:-256}" \
                --runs "${RUNS:-2}" --json >"$OUT/ab.out" 2>"$OUT/ab.err"
            rc=$?
            python3 - "$name" "$r" "$envs" "$rc" "${CALL:-0}" "$OUT" <<'PY' | tee -a "$OUT/ab.jsonl" | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print(d["round"], d.get("model"), d["variant"], round(d.get("decode_tok_s") or 0, 1),
          d.get("logits_checksum"), "fallbacks", d.get("graph_fallbacks"), d.get("error", "")[:300])'
import json, sys
name, r, envs, rc, call, out = sys.argv[1:]
try:
    d = json.loads(open(f"{out}/ab.out").read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError):
    d = {"error": open(f"{out}/ab.err").read()[-600:]}
print(json.dumps({"call": int(call), "variant": name, "env": envs, "round": int(r), "rc": int(rc), **d}))
PY
        done
    done
done
rm -f "$OUT/ab.out" "$OUT/ab.err"
