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

have_version() {
	node -e 'const p=require(process.argv[1]); if (p.version !== process.argv[2]) process.exit(1)' \
		"$here/node_modules/onnxruntime-node/package.json" "$VERSION" 2>/dev/null
}

if ! have_version; then
	echo "oracle/install.sh: npm install --ignore-scripts onnxruntime-node@$VERSION" >&2
	# No lockfile (it would name registry hosts) and keep package.json as committed.
	if ! npm install --ignore-scripts --no-audit --no-fund --no-save --no-package-lock \
			"onnxruntime-node@$VERSION" >&2; then
		echo "oracle/install.sh: FAILED: npm install onnxruntime-node@$VERSION" >&2
		exit 1
	fi
	if ! have_version; then
		echo "oracle/install.sh: FAILED: onnxruntime-node@$VERSION is not in $here/node_modules after npm install" >&2
		exit 1
	fi
fi

TOKVER=0.2.0
have_tok() {
	node -e 'const p=require(process.argv[1]); if (p.version !== process.argv[2]) process.exit(1)' \
		"$here/node_modules/@huggingface/tokenizers/package.json" "$TOKVER" 2>/dev/null
}
if ! have_tok; then
	echo "oracle/install.sh: npm install --ignore-scripts @huggingface/tokenizers@$TOKVER" >&2
	if ! npm install --ignore-scripts --no-audit --no-fund --no-save --no-package-lock \
			"onnxruntime-node@$VERSION" "@huggingface/tokenizers@$TOKVER" >&2 || ! have_tok; then
		echo "oracle/install.sh: FAILED: npm install @huggingface/tokenizers@$TOKVER" >&2
		exit 1
	fi
fi

TIKVER=1.0.22
have_tik() {
	node -e 'const p=require(process.argv[1]); if (p.version !== process.argv[2]) process.exit(1)' \
		"$here/node_modules/tiktoken/package.json" "$TIKVER" 2>/dev/null
}
if ! have_tik; then
	echo "oracle/install.sh: npm install --ignore-scripts tiktoken@$TIKVER" >&2
	if ! npm install --ignore-scripts --no-audit --no-fund --no-save --no-package-lock \
			"onnxruntime-node@$VERSION" "@huggingface/tokenizers@$TOKVER" "tiktoken@$TIKVER" >&2 || ! have_tik; then
		echo "oracle/install.sh: FAILED: npm install tiktoken@$TIKVER" >&2
		exit 1
	fi
fi

# The binding must load (node's N-API ABI, glibc): fail here rather than in a test.
if ! node -e 'const ort=require("onnxruntime-node"); console.log("onnxruntime-node " + ort.env.versions.node + " on node " + process.versions.node)'; then
	echo "oracle/install.sh: FAILED: onnxruntime-node does not load on node $(node --version)" >&2
	exit 1
fi
