#!/usr/bin/env python3
"""signal_during.py SIG GLOB CMD... — starts CMD (SIGINT, SIGTERM, SIGHUP
at their defaults), waits until a path matching GLOB exists (the command's
temporary, e.g. 'OUT.tmp.*'), sends SIG to it and prints 'exit N' (128+sig
when the command died by the signal, as a shell shows it) and 'left: ...'
for every path still matching GLOB. Fails if CMD ends before GLOB appears
(the test would prove nothing) or does not end within 60 s."""
import glob, signal, subprocess, sys, time

sig = getattr(signal, sys.argv[1])
pattern = sys.argv[2]
cmd = sys.argv[3:]


def defaults():
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)


p = subprocess.Popen(cmd, preexec_fn=defaults, stdout=subprocess.DEVNULL)
t0 = time.time()
while not glob.glob(pattern):
    if p.poll() is not None:
        sys.exit("signal_during: '%s' ended (status %d) before %s appeared" % (" ".join(cmd), p.returncode, pattern))
    if time.time() - t0 > 60:
        p.kill()
        sys.exit("signal_during: %s did not appear within 60 s" % pattern)
    time.sleep(0.002)
time.sleep(0.05)
p.send_signal(sig)
try:
    rc = p.wait(60)
except subprocess.TimeoutExpired:
    p.kill()
    sys.exit("signal_during: '%s' did not end within 60 s of the signal" % " ".join(cmd))
print("exit %d" % (128 - rc if rc < 0 else rc))
for left in sorted(glob.glob(pattern)):
    print("left: " + left)
