#!/usr/bin/env bash
# Writes the seed corpora for the fuzz targets into fuzz/corpus/<target>/ from databases that
# SQLite generates at run time (the partitioner's `fuzz::write_seed_corpora` test does the work).
# Nothing here is committed: corpora are binary and regenerated on demand.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$here/corpus"
CORESCAN_FUZZ_CORPUS="$here/corpus" cargo test --manifest-path "$here/../Cargo.toml" \
    -p partitioner --test partitioner fuzz::write_seed_corpora -- --exact --nocapture
for target in header btree record wal; do
    echo "$target: $(ls "$here/corpus/$target" | wc -l) seeds"
done
