#!/usr/bin/env bash
# Reproduces every figure quoted in the README and the issue notes. Run from the repository root with the
# package installed (pip install -e '.[test]'). Outputs JSON into experiments/results/ (small summaries only:
# no copy of ../shared/data and no model trained on it is written there; trained models go to results/).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared/data}
GAVEL=$SHARED/gavel/simulation_throughputs.json
OUT=experiments/results
mkdir -p "$OUT" results

echo "1. default run: embedded workload, parametric truth (calibrated law), physical predictor, every policy"
horus simulate --json --no-progress --out results/default > "$OUT/simulate_default.json"

if [ -f "$GAVEL" ]; then
  echo "2. co-location slowdown model fitted to Gavel's V100 pairs (the parametric world's scalars)"
  horus truth fit --gavel "$GAVEL" --gpu v100 --json > "$OUT/truth_fit_v100.json"
  echo "2b. the same law with latent per-type intensity (what the gavel truth uses for unmeasured sets)"
  horus truth fit --gavel "$GAVEL" --gpu v100 --inputs latent --json > "$OUT/truth_fit_v100_latent.json"
  echo "3. interference predictors on Gavel pairs: random / cold-start / cross-GPU"
  horus interference evaluate --gavel "$GAVEL" --protocol all --json > "$OUT/interference_eval.json"
  echo "4. Gavel V100 measured pairs as truth; geng and horus-iasp with an IASP model trained on P100 pairs (never on the pairs the truth replays)"
  horus interference train --gavel "$GAVEL" --gpu p100 --model iasp --out results/iasp-p100 > /dev/null
  horus simulate --json --no-progress --truth gavel --gavel "$GAVEL" --interference-model results/iasp-p100 \
    --out results/gavel-v100 > "$OUT/simulate_gavel_v100.json"
  echo "5b. congested Philly: first 5,000 jobs of the Philly table on the embedded 64-GPU cluster"
  horus simulate --json --no-progress --trace "$SHARED/traces/philly/philly_jobs.csv" --format philly --max-jobs 5000 \
    --out results/philly-5k > "$OUT/simulate_philly_5k_64gpu.json"
  echo "5c. Alibaba openb GPU-sharing trace on its own 1,213-node cluster"
  horus simulate --json --no-progress --trace "$SHARED/traces/alibaba-openb/openb_pod_list_default.csv" --format openb \
    --cluster "$SHARED/traces/alibaba-openb/openb_node_list_gpu_node.csv" --out results/openb > "$OUT/simulate_openb.json"
  echo "5. summed utilization vs slowdown on Gavel pairs (utilization-as-a-proxy analysis)"
  horus colocation analyze --gavel "$GAVEL" --json > "$OUT/colocation_gavel.json"
else
  echo "skipping steps 2-5: $GAVEL not found"
fi

echo "6. learned predictors on the SYNTHETIC fixture (no GPU measurements exist yet)"
horus predictor evaluate tests/fixtures/synthetic_profiles/SYNTHETIC_profiles.csv --json > "$OUT/predictor_eval_SYNTHETIC.json"
echo "done: $OUT"
