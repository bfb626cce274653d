#!/usr/bin/env bash
# The int4 one-row kernel on the H200 machine in one call: the per-kernel checks, the int4 GEMVs
# alone under each kernel variant (a binary and its NVRTC defines), then the int4 bench models
# made once and an alternating end-to-end A/B of the variants. One JSON line per GEMV run in
# $OUT/gemv.jsonl and per end-to-end run in $OUT/ab.jsonl (benches/ab_h200.sh), each with its
# variant; summaries on stdout.
#
#   OUT=$OUT bash crates/backend-native/benches/int4_h200.sh "VARIANT..."
#     VARIANT  NAME:BIN_DIR[:ENV=VALUE,...]  a folder holding genai-bridge, cuda_kernels and
#              cuda_gemv, and the environment it runs under, e.g.
#              "base:/tmp/a s32:/tmp/a:GENAI_BRIDGE_INT4_SCALES=f32
#               old:/tmp/b:GENAI_BRIDGE_INT4_SCALES=f32"
#              (the GEMVs run on f16 scales, --weights int4-sym-s16, as the models do by
#              default, unless the variant sets GENAI_BRIDGE_INT4_SCALES=f32: --weights
#              int4-sym; binaries from before f16 scales became the default need it set)
# Environment: STAGES ("kernels gemv make ab"), GEMV_MODELS (all three shapes), ROUNDS (2),
# SHAPES/MODELS_DIR as benches/decode_h200.sh (made with MAKE_ONLY=1; needs carry/bench/site),
# KERNELS_BIN (the first variant's folder: where cuda_kernels runs from).
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ $# == 1 ]] || { sed -n 2,19p "$0"; exit 2; }
variants=$1
OUT="${OUT:-int4-out}"
mkdir -p "$OUT"
. benches/h200_env.sh
stages=" ${STAGES:-kernels gemv make ab} "
want() { [[ "$stages" == *" $1 "* ]]; }
first=${variants%% *}
first_bin=$(cut -d: -f2 <<<"$first")

if want kernels; then
    bin="${KERNELS_BIN:-$first_bin}"
    timeout 200 "$bin/cuda_kernels" --test-threads=1 --nocapture >"$OUT/kernels.log" 2>&1
    echo "cuda_kernels rc=$? $(grep -E '^test result' "$OUT/kernels.log" | tail -1 | cut -c1-60)"
    grep -E 'FAIL|DIFFER|panicked' "$OUT/kernels.log" | head -12
    echo "tensor-core int4 cases ok: $(grep -c 'tensor cores.* ok$' "$OUT/kernels.log")"
fi

# Runs one variant's command with its environment: run VARIANT COMMAND...
run() {
    local v=$1 envs
    shift
    envs=$(cut -d: -f3- <<<"$v")
    # shellcheck disable=SC2086  # envs is a list of NAME=VALUE words
    env ${envs//,/ } "$@"
}

if want gemv; then
    for r in $(seq 1 "${ROUNDS:-2}"); do
        for v in $variants; do
            name=${v%%:*} bin=$(cut -d: -f2 <<<"$v") weights=int4-sym-s16
            [[ "$v" == *GENAI_BRIDGE_INT4_SCALES=f32* ]] && weights=int4-sym
            # shellcheck disable=SC2086  # the model list is words
            run "$v" timeout 120 "$bin/cuda_gemv" ${GEMV_MODELS:-llama3-8b qwen2.5-1.5b qwen2.5-0.5b} \
                --weights "$weights" 2>>"$OUT/gemv.err" |
                python3 -c 'import json, sys
for line in sys.stdin:
    d = json.loads(line); d["variant"], d["round"] = sys.argv[1], int(sys.argv[2]); print(json.dumps(d))' \
                    "$name" "$r" >>"$OUT/gemv.jsonl"
        done
    done
    python3 - "$OUT/gemv.jsonl" <<'PY'
import collections, json, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    d = json.loads(line)
    rows[d["case"]].append(f'{d["variant"]} {d["us_median"]:.1f}')
for case, runs in rows.items():
    print(f"{case:24} " + " | ".join(runs))
PY
fi

if want make; then
    OUT=/tmp/int4-make MAKE_ONLY=1 PRECISIONS=int4 ORT_CARRY=/nonexistent \
        bash benches/decode_h200.sh >"$OUT/make.log" 2>&1
    echo "make rc=$? ($(tail -1 "$OUT/make.log" | cut -c1-80))"
fi

if want ab; then
    models=""
    for shape in ${SHAPES:-qwen2.5-0.5b qwen2.5-1.5b llama3-8b}; do models+="$shape-int4-cuda "; done
    for r in $(seq 1 "${ROUNDS:-2}"); do
        for v in $variants; do
            name=${v%%:*} bin=$(cut -d: -f2 <<<"$v") envs=$(cut -d: -f3- <<<"$v")
            BIN="$bin/genai-bridge" CALL="$r" OUT="$OUT" \
                bash benches/ab_h200.sh 1 "$models" "$name:$envs"
        done
    done
fi
