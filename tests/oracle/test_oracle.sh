#!/bin/sh
# test_oracle.sh WLOWER WORKDIR [run_oracle.py options] — the 'oracle' suite:
# installs ONNX Runtime (tests/oracle/install.sh), then checks `wlower run`
# against it on generated models and `wlower quantize` against its quantizer
# (tests/oracle/run_oracle.py). Ends with "oracle: N passed, M failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 2 ]; then
	echo "usage: test_oracle.sh WLOWER WORKDIR [--full] [--only SUBSTR] [--threads N]" >&2
	exit 2
fi
wlower=$1
work=$2
shift 2
if ! sh "$here/install.sh"; then
	echo "test_oracle: the ONNX Runtime oracle could not be installed"
	echo "oracle: 0 passed, 1 failed"
	exit 1
fi
mkdir -p "$work"
exec /usr/bin/python3 "$here/run_oracle.py" "$wlower" "$work" "$@"
