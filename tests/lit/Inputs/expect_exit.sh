#!/bin/sh
# expect_exit.sh CODE CMD... — runs CMD, copies its stderr to stdout (for
# FileCheck), and fails unless CMD exited with exactly CODE.
want=$1
shift
"$@" 2>&1
got=$?
if [ "$got" -ne "$want" ]; then
	echo "expect_exit: '$*' exited $got, expected $want" >&2
	exit 1
fi
exit 0
