#!/bin/sh
# robustness.sh [BUILD ...] — the full robustness campaign (tests/robustness/
# campaign.py, issue 14: every case of every class) against BUILD/wlower for
# each BUILD (default: build build-asan), the sanitized one with the ASan/UBSan
# options of scripts/test.sh. Needs root for the full-disk class (a small
# tmpfs per case; not root counts as failures, never a silent skip).
# Prints the per-class summary and every failure; logs in
# $BENCH_CACHE/robustness-BUILD.log (default /tmp/wlower-bench-robustness).
# Environment: JOBS (parallel cases, default 2), SEED (default 14).
set -u
cd "$(dirname "$0")/.."
OUT=${BENCH_CACHE:-/tmp/wlower-bench-robustness}
mkdir -p "$OUT"
[ $# -gt 0 ] || set -- build build-asan
rc=0
for b in "$@"; do
	[ -x "$b/wlower" ] || { echo "robustness.sh: $b/wlower missing (build it first)"; rc=1; continue; }
	name=$(basename "$b")
	echo "== $b/wlower =="
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
		/usr/bin/python3 tests/robustness/campaign.py "$b/wlower" "$OUT/work-$name" \
		--jobs "${JOBS:-2}" --seed "${SEED:-14}" --timeout 300 >"$OUT/robustness-$name.log" 2>&1 || rc=1
	grep -v '^known ' "$OUT/robustness-$name.log"
done
exit $rc
