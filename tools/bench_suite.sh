#!/usr/bin/env bash
# The five benchmarks at the sizes used to compare two versions of the code:
#   tools/bench_suite.sh OUTDIR
# Run it from a checkout (with memtrio importable from that checkout, e.g. after
# `pip install -e .`); each benchmark's output goes to OUTDIR/<name>.txt.
set -euo pipefail
out=${1:?usage: tools/bench_suite.sh OUTDIR}
mkdir -p "$out"
python tools/bench_protocol.py --runs 3 > "$out/protocol.txt" 2>&1
python tools/bench_protocol.py --runs 3 --window 1 --pings 3000 > "$out/protocol1.txt" 2>&1
python tools/bench_memory.py --sizes 10000 --calls 300 > "$out/memory.txt" 2>&1
python tools/bench_graph.py --sizes 10000 --calls 200 --skip-reference > "$out/graph.txt" 2>&1
python tools/bench_code.py --files 1500 --cold-runs 3 --warm-runs 5 --queries 200 > "$out/code.txt" 2>&1
python tools/bench_recall.py --sizes 10000 --calls 100 > "$out/recall.txt" 2>&1
