#!/usr/bin/env bash
# Experiment switches (NVRTC defines that are off by default) on the H200 machine in one call:
# the bench models made, `cuda_kernels` under the default and under each switch (while the
# models are made), then an alternating end-to-end A/B of the default and every switch
# (benches/ab_h200.sh: one JSON line per run in $OUT/ab.jsonl), and per model and variant the
# median tok/s and whether its logits checksum is the default's.
#
#   OUT=$OUT BIN_DIR=DIR bash crates/backend-native/benches/switches_h200.sh "NAME:SPEC..."
#     DIR       holds genai-bridge, cuda_kernels, cuda_parity and cuda_sampling (carry_h200.sh)
#     NAME:SPEC  NVRTC defines, e.g. "e0:W_EVICT=0 e1:W_EVICT=1+X=2" ('+' joins several), or
#               environment variables when SPEC starts with GENAI_BRIDGE_, e.g.
#               "walk:GENAI_BRIDGE_DECODE_GEMV=shared-walk
#               wide:GENAI_BRIDGE_INT4_MMA=wide,GENAI_BRIDGE_PDL=0" (',' joins several;
#               defines among them as GENAI_BRIDGE_NVRTC_DEFINES=A=1+B=2)
# Environment: SHAPES ("qwen2.5-0.5b qwen2.5-1.5b llama3-8b"), PRECISION (fp16), ROUNDS (2),
# STAGES ("make kernels ab"; also "parity": cuda_parity and cuda_sampling under each variant),
# CALL (0), BENCH_COMMIT, MODELS_DIR (/tmp/bench-models); the models are made by
# benches/decode_h200.sh (MAKE_ONLY=1: the shapes made at once unless MAKE_PARALLEL=0), which needs
# carry/bench/site.
set -uo pipefail
cd "$(dirname "$0")/../../.."
[[ $# == 1 ]] || { sed -n 2,16p "$0"; exit 2; }
switches=$1
OUT="${OUT:-switches-out}" BIN_DIR="${BIN_DIR:-carry/cuda}"
mkdir -p "$OUT"
. benches/h200_env.sh
stages=" ${STAGES:-make kernels ab} "
want() { [[ "$stages" == *" $1 "* ]]; }
precision=${PRECISION:-fp16} shapes=${SHAPES:-qwen2.5-0.5b qwen2.5-1.5b llama3-8b}

# A variant's environment as words for `env`: NAME=VALUE words (',' apart, '+' for a space in
# a value), or for a list of defines one GENAI_BRIDGE_NVRTC_DEFINES word.
variant_env() {
    local spec=$1
    if [[ "$spec" == GENAI_BRIDGE_* ]]; then
        local words
        IFS=, read -ra words <<<"$spec"
        printf '%s\n' "${words[@]//+/ }"
    else
        printf 'GENAI_BRIDGE_NVRTC_DEFINES=%s\n' "${spec//+/ }"
    fi
}

maker=
if want make; then
    (SHAPES="$shapes" MAKE_ONLY=1 PRECISIONS="$precision" ORT_CARRY=/nonexistent \
        BENCH_COMMIT="${BENCH_COMMIT:-unknown}" OUT="$OUT/make" bash benches/decode_h200.sh \
        >"$OUT/make.log" 2>&1
    echo "models made: rc=$?") &
    maker=$!
fi
if want kernels; then
    for v in "base:" $switches; do
        name=${v%%:*}
        mapfile -t envs < <(variant_env "${v#*:}")
        env "${envs[@]}" timeout 200 "$BIN_DIR/cuda_kernels" \
            --test-threads=1 --nocapture >"$OUT/kernels-$name.log" 2>&1
        echo "cuda_kernels $name rc=$? $(grep -E '^test result' "$OUT/kernels-$name.log" | tail -1 | cut -c1-60)"
        grep -E 'FAIL|DIFFER|panicked' "$OUT/kernels-$name.log" | head -6
    done
fi
if want parity; then
    for v in "base:" $switches; do
        name=${v%%:*}
        mapfile -t envs < <(variant_env "${v#*:}")
        for t in cuda_parity cuda_sampling; do
            env "${envs[@]}" timeout 200 "$BIN_DIR/$t" --test-threads=1 --nocapture \
                >"$OUT/$t-$name.log" 2>&1
            echo "$t $name rc=$? $(grep -E '^test result' "$OUT/$t-$name.log" | tail -1 | cut -c1-60)"
        done
    done
fi
[[ -n "$maker" ]] && wait "$maker"
if want ab; then
    variants="base:" models=""
    for v in $switches; do
        if [[ "${v#*:}" == GENAI_BRIDGE_* ]]; then
            variants+=" $v"
        else
            variants+=" ${v%%:*}:GENAI_BRIDGE_NVRTC_DEFINES=${v#*:}"
        fi
    done
    for s in $shapes; do models+=" $s-$precision-cuda"; done
    BIN="$BIN_DIR/genai-bridge" CALL="${CALL:-0}" OUT="$OUT" \
        bash benches/ab_h200.sh "${ROUNDS:-2}" "$models" "$variants" >"$OUT/ab.log"
    python3 - "$OUT/ab.jsonl" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
sums = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    runs[(d.get("model"), d["variant"])].append(d.get("decode_tok_s") or 0.0)
    sums.setdefault((d.get("model"), d["variant"]), set()).add(d.get("logits_checksum"))
for (model, variant), tok in sorted(runs.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] != "base")):
    same = sums[(model, variant)] == sums.get((model, "base"))
    print(f"{model:28} {variant:10} {statistics.median(tok):9.1f} tok/s  runs {len(tok)}  "
          f"checksum {'= base' if same else 'DIFFERS ' + str(sorted(map(str, sums[(model, variant)])))}")
PY
fi
