#!/usr/bin/env bash
# The GPU profiling campaign of Horus, in parts that each fit one 10-minute command.
#
#   scripts/gpu_campaign.sh solo      # >= 40 solo configs (13-15 model families x 3 batches, AMP subset, repeats)
#   scripts/gpu_campaign.sh plan      # choose 100 pairs + 20 triples from the solo results (seconds, no GPU work)
#   scripts/gpu_campaign.sh coloc     # run the planned sets
#   scripts/gpu_campaign.sh status    # rows so far
#
# Each part stops starting configurations after HORUS_PART_BUDGET_S (default 540 s) and exits 3 when some
# are left: rerun the SAME part until it exits 0 (finished rows are kept and skipped). Results live in
# $HORUS_CAMPAIGN_DIR (default campaign_data/, carry it to a fresh machine to resume) and are copied to
# $OUT after every part. Estimated device time at the defaults (window 5 s, warm-up 2 s): solo ~15 min,
# coloc ~35-40 min, i.e. about two sessions of 30 device-minutes. Nothing here fabricates data: a config
# that fails is a row with status oom/error.
set -uo pipefail
cd "$(dirname "$0")/.."

PART=${1:?usage: scripts/gpu_campaign.sh solo|plan|coloc|status}
DATA=${HORUS_CAMPAIGN_DIR:-campaign_data}
BUDGET=${HORUS_PART_BUDGET_S:-540}
WINDOW=${HORUS_WINDOW_S:-5}
WARMUP=${HORUS_WARMUP_S:-2}
PY=${PYTHON:-python}
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}"
SETTINGS=(--window-s "$WINDOW" --warmup-s "$WARMUP" --warmup-iters 5 --nvml-period 0.1 --time-budget-s "$BUDGET")
mkdir -p "$DATA"

copy_out() { if [ -n "${OUT:-}" ]; then mkdir -p "$OUT" && cp -r "$DATA" "$OUT/"; fi; }

write_solo_campaign() {
  # Model families x 3 batch sizes (fp32), the middle batch also under AMP for 8 models, and a second
  # repeat of the middle batch for 6 models. HF models only when transformers is importable here.
  "$PY" - "$DATA/solo_campaign.json" <<'PYEOF'
import importlib.util, json, sys
batches = {
    "resnet18": [64, 128, 256], "resnet50": [32, 64, 128], "vgg16": [16, 32, 64], "mobilenet_v2": [32, 64, 128],
    "densenet121": [16, 32, 64], "inception_v3": [16, 32, 64], "efficientnet_b0": [32, 64, 128],
    "vit_b16": [16, 32, 64], "transformer": [32, 64, 128], "lstm_lm": [20, 40, 80], "seq2seq": [32, 64, 128],
    "ncf": [512, 2048, 8192], "dlrm": [256, 1024, 4096],
}
if importlib.util.find_spec("transformers") is not None:
    batches |= {"bert_base": [8, 16, 32], "gpt2": [2, 4, 8]}
amp = ["resnet50", "vgg16", "mobilenet_v2", "vit_b16", "transformer", "lstm_lm", "ncf", "densenet121"]
repeat = {"resnet50", "vgg16", "transformer", "lstm_lm", "ncf", "mobilenet_v2"}
solo = [{"model": m, "batch": b, "precision": "fp32", "repeats": 2 if (m in repeat and i == 1) else 1}
        for m, bs in batches.items() for i, b in enumerate(bs)]
solo += [{"model": m, "batch": batches[m][1], "precision": "amp"} for m in amp]
json.dump({"solo": solo}, open(sys.argv[1], "w"), indent=1)
print(f"{len(solo)} solo configs over {len(batches)} models")
PYEOF
}

case "$PART" in
  solo)
    [ -f "$DATA/solo_campaign.json" ] || write_solo_campaign
    "$PY" -m horus.cli profile --campaign "$DATA/solo_campaign.json" --out "$DATA/solo" "${SETTINGS[@]}"
    rc=$?; copy_out; exit $rc ;;
  plan)
    "$PY" -m horus.cli profile plan-pairs --solo "$DATA/solo/profiles.csv" --pairs 100 --triples 20 --seed 0 \
      --out "$DATA/coloc_campaign.json"
    rc=$?; copy_out; exit $rc ;;
  coloc)
    "$PY" -m horus.cli profile colocate --campaign "$DATA/coloc_campaign.json" --solo "$DATA/solo/profiles.csv" \
      --out "$DATA/coloc" "${SETTINGS[@]}"
    rc=$?; copy_out; exit $rc ;;
  status)
    for f in "$DATA/solo/profiles.jsonl" "$DATA/coloc/colocation.jsonl"; do
      [ -f "$f" ] && echo "$f: $(wc -l < "$f") rows" || echo "$f: none"
    done ;;
  *) echo "unknown part $PART (solo|plan|coloc|status)" >&2; exit 2 ;;
esac
