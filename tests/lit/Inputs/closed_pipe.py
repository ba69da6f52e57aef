#!/usr/bin/env python3
"""closed_pipe.py CMD... — runs CMD with stdout a pipe whose read end is
already closed (so its first write fails with EPIPE, or SIGPIPE kills it),
with SIGPIPE at its default; exits with CMD's status (128+sig if killed)."""
import os, signal, subprocess, sys

r, w = os.pipe()
os.close(r)
p = subprocess.run(sys.argv[1:], stdout=w, preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_DFL))
sys.exit(128 - p.returncode if p.returncode < 0 else p.returncode)
