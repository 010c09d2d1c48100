#!/usr/bin/env bash
# The host-issue scan of docs/simulator-fidelity.md ("With the host-issue bound"): for each
# (host_kernel_us, host_micro_batch_us) pair, a copy of experiments/hardware.yaml whose GPU
# entries carry that pair (the repository's own figures replaced), and
# `shardgym validate-sim --published` on the single-node dev set with it. Prints the error
# line and the within-job ranking line per triple; the fitted one is that of lowest mean.
# Usage: scripts/reproduce/host_issue_scan.sh ["K1 K2 ..." ["MB1 MB2 ..." ["Q1 Q2 ..."]]]
#   (K, MB in µs; Q the exponent, "max" for none: max(GPU, host); defaults: the doc's grid)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin=${SHARDGYM_BIN:-${SHARDGYM_BUILD_DIR:-build}/experiments/shardgym}
kernels=${1:-"20 40 60 65 70 75 80"}
loops=${2:-"0 1500 2000 3000 5000"}
exponents=${3:-"max"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/experiments/validation"
cp -r experiments/validation/vtrain "$work/experiments/validation/"
for q in $exponents; do
for k in $kernels; do
  for mb in $loops; do
    # Drop the shipped host figures, then add the pair after every memory_efficiency line
    # (one per GPU entry).
    grep -v -E '^\s+host_(kernel_us|micro_batch_us|overlap_exponent):' experiments/hardware.yaml |
      awk -v k="$k" -v mb="$mb" -v q="$q" '{ print }
        /^[[:space:]]+memory_efficiency:/ { match($0, /^[[:space:]]+/); ind = substr($0, 1, RLENGTH);
          print ind "host_kernel_us: " k; print ind "host_micro_batch_us: " mb
          if (q != "max") print ind "host_overlap_exponent: " q }' \
      > "$work/experiments/hardware.yaml"
    echo "== host_kernel_us $k, host_micro_batch_us $mb, host_overlap_exponent $q"
    "$bin" validate-sim --published "$work/experiments/validation/vtrain/" |
      grep -E 'iteration time|jobs'
  done
done
done
