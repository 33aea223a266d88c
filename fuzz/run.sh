#!/usr/bin/env bash
# Run every fuzz target for N seconds each, one after the other, one job each.
#
#   bash fuzz/run.sh <seconds> [target ...]      (default: every target)
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). Works on the stable toolchain: no sanitizer
# (`--sanitizer none`: ASan needs nightly), release build with debug assertions and overflow
# checks (`-a`), libFuzzer from libfuzzer-sys. The committed seeds in fuzz/corpus/<target>/ are
# only read: new inputs go to fuzz/corpus/<target>/tmp/ (gitignored), so a run never changes
# tracked files.
#
# Prints each target's executions count and last a line `N passed, M failed` (targets without /
# with a crash); exits non-zero if any target crashed. The crashing input is saved in
# fuzz/artifacts/<target>/ (log: last-run.log there); reproduce it with
#   cd fuzz && cargo fuzz run -s none -O -a <target> artifacts/<target>/<file>
set -uo pipefail

secs="${1:-}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -eq 0 ]; then
  echo "usage: bash fuzz/run.sh <seconds> [target ...]" >&2
  exit 2
fi
shift
cd "$(dirname "$0")"

ALL_TARGETS=(handshake frames frames_deflate negotiate inflate deflate_roundtrip proxy)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${ALL_TARGETS[@]}")


if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
  exit 2
fi

echo "fuzz: building ${#targets[@]} targets (release, sanitizer none, debug assertions on)"
: >build.log
# One cargo invocation for every target: the instrumented dependencies are built once and the
# targets link in parallel (one invocation per target linked them one after the other).
build_args=()
[ ${#targets[@]} -lt ${#ALL_TARGETS[@]} ] && build_args=("${targets[@]}")
if [ ${#build_args[@]} -le 1 ]; then
  if ! cargo fuzz build -s none -O --debug-assertions "${build_args[@]}" >>build.log 2>&1; then
    tail -40 build.log >&2
    echo "fuzz: build failed (full log: fuzz/build.log)" >&2
    exit 1
  fi
else
  for t in "${build_args[@]}"; do
    if ! cargo fuzz build -s none -O --debug-assertions "$t" >>build.log 2>&1; then
      tail -40 build.log >&2
      echo "fuzz: build of $t failed (full log: fuzz/build.log)" >&2
      exit 1
    fi
  done
fi

failed=()
summary=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t/tmp" "artifacts/$t"
  log="artifacts/$t/last-run.log"
  start=$(date +%s)
  dict=()
  [ -f "dict/$t.dict" ] && dict=(-dict="dict/$t.dict")
  # -max_total_time bounds the run; -timeout flags a single input running > 10 s (a hang);
  # -rss_limit_mb catches runaway allocations (the harnesses cap messages at 1 MiB).
  cargo fuzz run -s none -O --debug-assertions "$t" "corpus/$t/tmp" "corpus/$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 "${dict[@]}" >"$log" 2>&1 </dev/null
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')
  corpus=$(ls "corpus/$t/tmp" | wc -l)
  if [ $rc -ne 0 ]; then
    failed+=("$t")
    echo "fuzz: $t CRASHED (exit $rc) after ${took}s, ${execs:-?} executions; log: fuzz/$log"
    grep -E '^(thread|panicked|==[0-9]+==|SUMMARY|artifact_prefix|Test unit written)' "$log" | head -10
  else
    echo "fuzz: $t ok: ${execs:-?} executions in ${took}s, coverage ${cov:-?}, ${corpus} new inputs"
  fi
  summary+=("$t=${execs:-0}")
done

echo "fuzz: executions: ${summary[*]}"
[ ${#failed[@]} -gt 0 ] && echo "fuzz: crashes in: ${failed[*]}"
echo "$(( ${#targets[@]} - ${#failed[@]} )) passed, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
