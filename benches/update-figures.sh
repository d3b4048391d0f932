#!/usr/bin/env bash
# Runs the benchmarks and rewrites the measured column of BENCHMARKS.md from their output.
#
#   benches/update-figures.sh                      # every criterion bench + every figure script
#   benches/update-figures.sh plugins protocol     # only these criterion benches (benches/<name>.rs)
#   benches/update-figures.sh --no-criterion       # only the figure scripts
#   benches/update-figures.sh --no-scripts plugins # only criterion bench `plugins`
#   benches/update-figures.sh --no-run             # run nothing; rewrite from results on disk
#   BENCH_ARGS='--measurement-time 10' benches/update-figures.sh   # criterion options
#
# Figure scripts are the executable files benches/fig-* : each writes
# "$BENCH_FIGURES_DIR/<name>.json" = {"row id": "formatted figure"} (BENCH_FIGURES_DIR is
# ${CARGO_TARGET_DIR:-target}/bench-figures). Then benches/update_figures.py rewrites every
# BENCHMARKS.md row whose first cell is a backticked criterion id or figure row id, and
# stamps the file with the commit and date.
set -euo pipefail
cd "$(dirname "$0")/.."

run_criterion=1
run_scripts=1
benches=()
for a in "$@"; do
    case "$a" in
        --no-criterion) run_criterion=0 ;;
        --no-scripts) run_scripts=0 ;;
        --no-run) run_criterion=0; run_scripts=0 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        -*) echo "unknown option $a (see --help)" >&2; exit 2 ;;
        *) benches+=("$a") ;;
    esac
done

target="${CARGO_TARGET_DIR:-target}"
export BENCH_FIGURES_DIR="${BENCH_FIGURES_DIR:-$target/bench-figures}"
mkdir -p "$BENCH_FIGURES_DIR"
# Short runs by default: the machine is shared; pass BENCH_ARGS for longer ones.
read -r -a crit_args <<< "${BENCH_ARGS:---warm-up-time 1 --measurement-time 3}"

if [ "$run_criterion" = 1 ]; then
    if [ "${#benches[@]}" = 0 ]; then
        for f in benches/*.rs; do benches+=("$(basename "$f" .rs)"); done
    fi
    for b in "${benches[@]}"; do
        if [ ! -f "benches/$b.rs" ]; then
            echo "no criterion bench benches/$b.rs" >&2
            exit 2
        fi
        echo "== cargo bench --bench $b" >&2
        cargo bench --bench "$b" -- "${crit_args[@]}"
    done
fi

if [ "$run_scripts" = 1 ]; then
    for s in benches/fig-*; do
        [ -x "$s" ] || continue
        echo "== $s" >&2
        "$s"
    done
fi

python3 benches/update_figures.py
