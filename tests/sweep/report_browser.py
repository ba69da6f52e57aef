#!/usr/bin/python3
"""report_browser.py CHROMIUM REPORT.html WORKDIR — report.html of `wlower sweep` in headless Chromium.

Takes a screenshot (WORKDIR/report.png) with the console logged, and checks that the page
rendered its charts (the screenshot holds the targets' bar colours and the category colours,
decoded here from the PNG) and that the console has no error (uncaught exceptions, failed
loads). A negative control — the same page with a broken script — must be caught.
Ends with "N passed, M failed".
"""
import os
import re
import struct
import subprocess
import sys
import zlib

CHROMIUM, REPORT, WORK = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
os.makedirs(WORK, exist_ok=True)
passed = failed = 0


def check(cond, what):
    global passed, failed
    passed, failed = passed + bool(cond), failed + (not cond)
    print(("ok   " if cond else "FAIL ") + what)


def shoot(page, png):
    """Screenshot of page; returns the console lines Chromium logged."""
    prof = os.path.join(WORK, "profile")
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--user-data-dir=" + prof, "--enable-logging=stderr", "--v=0",
                        "--window-size=1000,820", "--screenshot=" + png, "file://" + page],
                       capture_output=True, text=True, timeout=120)
    return [line for line in p.stderr.splitlines() if "CONSOLE" in line]


def png_pixels(path):
    """RGB(A) rows of an 8-bit non-interlaced PNG (what Chromium writes)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    colours = {}
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            k = bytes(line[x:x + 3])
            colours[k] = colours.get(k, 0) + 1
        prev = line
    return colours


def rgb(h):
    return bytes.fromhex(h.lstrip("#"))


png = os.path.join(WORK, "report.png")
console = shoot(REPORT, png)
check(os.path.isfile(png) and os.path.getsize(png) > 10000, "screenshot taken (%s)" % png)
errors = [line for line in console if re.search(r"Uncaught|Error|Failed", line)]
check(not errors, "console has no errors" + ("" if not errors else ": " + errors[0]))
col = png_pixels(png)
for name, c in (("qc-n bars", "#1b9e77"), ("qc-p bars", "#d95f02"), ("compute segments", "#4e79a7"),
                ("data_ocm segments", "#e15759")):
    check(col.get(rgb(c), 0) > 200, "charts rendered: %s (%d pixels of %s)" % (name, col.get(rgb(c), 0), c))
# negative control: a broken script is reported
html = open(REPORT).read().replace("<script>\n", "<script>\nundefined_function_of_the_test();\n", 1)
broken = os.path.join(WORK, "broken.html")
open(broken, "w").write(html)
bad = shoot(broken, os.path.join(WORK, "broken.png"))
check(any("Uncaught" in line for line in bad), "negative control: a script error shows in the console")
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
