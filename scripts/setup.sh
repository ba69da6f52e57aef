#!/bin/sh
# setup.sh — install what wlower needs on Debian 12 (as root) and build it.
# Idempotent: packages already present are skipped by apt; the build is
# incremental. Usage: sh scripts/setup.sh [BUILD_DIR]   (default: build)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}

PKGS="gcc g++ make pkg-config meson ninja-build
      libprotobuf-c-dev protobuf-c-compiler libcjson-dev libssl-dev check
      llvm-19-dev llvm-19-tools clang-19 libclang-rt-19-dev
      libonnx-dev libonnx-testdata python3-onnx python3-torch python3-numpy
      libsndfile1-dev libsoxr-dev zlib1g-dev libzstd-dev lld libpcre2-dev libutf8proc-dev time chromium"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "setup: installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing
fi

if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" --buildtype=debugoptimized
fi
ninja -C "$BUILD"
