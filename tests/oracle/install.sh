#!/bin/sh
# install.sh — install the oracles into tests/oracle/node_modules, once:
# ONNX Runtime (onnxruntime-node 1.30.0, CPU library for Linux x64) and
# Hugging Face's tokenizers.js (@huggingface/tokenizers 0.2.0, pure JS) and
# OpenAI's tiktoken (tiktoken 1.0.22: the Rust crate as WASM, inside the package).
#
# node and npm come from the machine; on a Debian 12 without them this
# installs Debian's `nodejs npm` (node 18, which loads the N-API v6 binding).
# --ignore-scripts: the package's install script only fetches optional GPU
# libraries; the CPU library ships inside the package itself.
# Exits non-zero, loudly, when anything fails. Prints the ORT version.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
VERSION=1.30.0

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "oracle/install.sh: node and npm are missing; install them (apt-get install nodejs npm)" >&2
		exit 1
	fi
	echo "oracle/install.sh: installing Debian's nodejs and npm" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2
	apt-get install -y -q --no-install-recommends nodejs npm >&2
fi

TOKVER=0.2.0
TIKVER=1.0.22
PKGS="onnxruntime-node@$VERSION @huggingface/tokenizers@$TOKVER tiktoken@$TIKVER"

# have NAME@VERSION: node_modules holds exactly that version
have() {
	node -e 'const p=require(process.argv[1]); if (p.version !== process.argv[2]) process.exit(1)' \
		"$here/node_modules/${1%@*}/package.json" "${1##*@}" 2>/dev/null
}
missing=""
for p in $PKGS; do
	have "$p" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "oracle/install.sh: npm install --ignore-scripts$missing" >&2
	# All of them in one install: npm removes what a later install does not name.
	# No lockfile (it would name registry hosts) and keep package.json as committed.
	# shellcheck disable=SC2086
	if ! npm install --ignore-scripts --no-audit --no-fund --no-save --no-package-lock $PKGS >&2; then
		echo "oracle/install.sh: FAILED: npm install$missing" >&2
		exit 1
	fi
	for p in $PKGS; do
		if ! have "$p"; then
			echo "oracle/install.sh: FAILED: $p is not in $here/node_modules after npm install" >&2
			exit 1
		fi
	done
fi

# The binding must load (node's N-API ABI, glibc): fail here rather than in a test.
if ! node -e 'const ort=require("onnxruntime-node"); console.log("onnxruntime-node " + ort.env.versions.node + " on node " + process.versions.node)'; then
	echo "oracle/install.sh: FAILED: onnxruntime-node does not load on node $(node --version)" >&2
	exit 1
fi
