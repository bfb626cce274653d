#!/usr/bin/env bash
# Aggregate decode speed against the batch size on this machine's CPU: `genai-bridge bench --batch N`
# for each N, ROUNDS rounds with the sizes alternating inside a round (the machine's noise then
# falls on every size alike). One JSON line per run (the bench line plus its round) on stdout; a
# table of the medians over the rounds on stderr.
#
#   bash benches/cpu_batch.sh MODEL_DIR [ROUNDS (3)] [SIZES ("1 2 4 8 16")] > results.jsonl
# Environment: BIN (target/release/genai-bridge), THREADS (2), PROMPT_TOKENS (128),
# DECODE_TOKENS (128), RUNS (2, after one warm-up).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: cpu_batch.sh MODEL_DIR [ROUNDS] [SIZES]}
rounds=${2:-3} sizes=${3:-1 2 4 8 16}
bin=${BIN:-target/release/genai-bridge}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq 1 "$rounds"); do
    for n in $sizes; do
        "$bin" bench "$model" --backend native --threads "${THREADS:-2}" \
            --prompt-tokens "${PROMPT_TOKENS:-128}" --decode-tokens "${DECODE_TOKENS:-128}" \
            --runs "${RUNS:-2}" --batch "$n" --json |
            python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); d['round']=$r; print(json.dumps(d))" |
            tee -a "$out"
    done
done
python3 - "$out" >&2 <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for d in rows:
    by.setdefault(d["batch"], []).append(d)
one = statistics.median(d["decode_tok_s"] for d in by.get(1, [])) if 1 in by else None
print("| N | decode tok/s (aggregate) | x N=1 | TTFT ms | inter-token p50 ms | p90 ms |")
print("|---|---|---|---|---|---|")
for n, ds in sorted(by.items()):
    med = lambda k: statistics.median(d[k] for d in ds)
    ratio = f"{med('decode_tok_s') / one:.2f}" if one else "-"
    print(f"| {n} | {med('decode_tok_s'):.1f} | {ratio} | {med('ttft_ms'):.0f} | "
          f"{med('decode_ms_median'):.1f} | {med('decode_ms_p90'):.1f} |")
PY
