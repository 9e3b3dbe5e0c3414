#!/usr/bin/env bash
# Refit every shipped fitted artifact on the design split of bench-dev only (issue 31), then
# measure the design holdout (bench-unseen + bench-dev's held-out sources) as a user meets it.
#   bash benchmarks/refit_shipped.sh DEV_LIBRARY HOLDOUT_LIBRARY OUT_DIR
# DEV_LIBRARY holds bench-dev (videos indexed, records imported), HOLDOUT_LIBRARY the holdout's
# clips (bench-unseen + bench-dev's held-out sources): separate, so that not even the text index's
# word statistics of the fits see a holdout clip. Both are built when missing (perception of 47
# clips: ~8 min on 2 cores). Nothing here shows a holdout clip's result: the last step prints only
# the totals (--quiet).
set -euo pipefail
cd "$(dirname "$0")/.."
LIB=${1:?dev library folder}; HOLD=${2:?holdout library folder}; OUT=${3:?output folder}
S=../shared/data
mkdir -p "$OUT"
strived() { .venv/bin/strived "$@"; }
strived eval $S/bench-dev --library "$LIB" --index-videos --cv 0 --methods bm25 --quiet >/dev/null
strived calibrate "$LIB" --benchmark $S/bench-dev --profile tracks --split design \
    --out resources/rule_library.json --report "$OUT/calibrate_tracks.json"
strived calibrate "$LIB" --benchmark $S/bench-dev --profile video --split design \
    --out resources/rule_library_video.json --report "$OUT/calibrate_video.json"
strived eval $S/bench-dev --library "$LIB" --split design --cv source \
    --fit-router resources/router.json --fit-relevance resources/relevance.json \
    --json "$OUT/design_loso.json" > "$OUT/design_loso.txt"
# an existing HOLDOUT_LIBRARY is used as it is (issue 31 measured one holding exactly the 20 holdout
# clips); a missing one is built from the two folders (every bench-dev clip is perceived into it,
# only the holdout's are ranked)
IDX=(); [ -d "$HOLD" ] || IDX=(--index-videos)
strived eval $S/bench-unseen $S/bench-dev --library "$HOLD" --split holdout --items video --cv 0 --quiet \
    "${IDX[@]}" --methods full,equal,rule,dense,bm25,rule-hand,full-uncalibrated,full-wordlist,full-rerank \
    --json "$OUT/holdout_after.json" | tee "$OUT/holdout_after.txt"
