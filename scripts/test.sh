#!/bin/sh
# test.sh — install, build and run every test:
#   1. build/       debugoptimized (IR verifier after every pass): unit, lit, conformance
#   2. build-asan/  the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   3. build-fuzz/  libFuzzer (clang) on the binary importer, the text parser,
#                   the .npy, .tranges, manifest and tokenizer.json readers, bounded time
#                   (FUZZ_SECONDS, default 20 each), corpora seeded by
#                   tests/fuzz/seed.sh (libonnx-testdata and small generated files)
# Ends with one line "N passed, M failed" and exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
FUZZ_TARGETS="import text npy tranges manifest tokenizer"
passed=0
failed=0
fail() { echo "test.sh: FAILED: $*"; failed=$((failed + 1)); }

sh scripts/setup.sh build || { echo "test.sh: setup/build failed"; echo "0 passed, 1 failed"; exit 1; }

count() { # count results of a meson test log into passed/failed
	log="$1/meson-logs/testlog.json"
	[ -f "$log" ] || { fail "no test log in $1"; return; }
	p=$(grep -c '"result": "OK"' "$log")
	f=$(grep -c '"result": "\(FAIL\|TIMEOUT\|ERROR\|UNEXPECTEDPASS\)"' "$log")
	s=$(grep -c '"result": "SKIP"' "$log")
	passed=$((passed + p))
	failed=$((failed + f + s))   # a skipped test counts as a failure here
}

echo "== suite: build (debug, verifier on) =="
meson test -C build --print-errorlogs --num-processes 2 || true
count build

echo "== suite: build-asan (ASan + UBSan) =="
if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
if ninja -C build-asan >/dev/null; then
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 3 || true
	count build-asan
else
	fail "ASan build"
fi

echo "== suite: fuzz (${FUZZ_SECONDS}s per target) =="
if [ ! -f build-fuzz/build.ninja ]; then
	CC=clang-19 meson setup build-fuzz --buildtype=debugoptimized -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fsanitize=fuzzer-no-link >/dev/null
fi
if ninja -C build-fuzz $(for t in $FUZZ_TARGETS; do printf 'fuzz_%s ' $t; done) >/dev/null; then
	sh tests/fuzz/seed.sh build/wlower build-fuzz/corpus
	for t in $FUZZ_TARGETS; do
		mkdir -p "build-fuzz/corpus-$t-new"
		if FUZZ_TOKENIZER_DIR=build-fuzz/corpus/tokenizer ./build-fuzz/fuzz_$t -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=4096 \
			-print_final_stats=1 "build-fuzz/corpus-$t-new" "build-fuzz/corpus/$t" \
			>"build-fuzz/fuzz_$t.log" 2>&1; then
			echo "fuzz_$t: ok ($(grep -m1 stat::number_of_executed_units "build-fuzz/fuzz_$t.log" | awk '{print $2}') runs)"
			passed=$((passed + 1))
		else
			tail -40 "build-fuzz/fuzz_$t.log"
			fail "fuzz_$t (log: build-fuzz/fuzz_$t.log; crash input saved as crash-*)"
		fi
	done
else
	fail "fuzz build"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
