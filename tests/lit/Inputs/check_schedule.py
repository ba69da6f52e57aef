"""check_schedule.py DIR — consistency of a chimera module directory
(targets/chimera/emit_cpp.c): schedule.json against the schema of docs/FORMATS.md,
module.cpp and weights.bin. Prints one summary line; exits 1 with the reason.

Checks: top-level keys and config; every kernel's fields; per-core macs and
alu_ops sum to the kernel's; each kernel's ddr_to_ocm / ocm_to_ddr DMA totals
equal the bytes of the ccl::dma calls in its function kN of module.cpp;
weights_bytes == size of weights.bin; every OCM buffer lies inside
ocm_peak_bytes <= ocm_bytes; the OCM buffers of one kernel do not overlap
(unless they are the same value); every spill is named in the buffers of a
kernel with mem "ddr"."""
import json
import os
import re
import sys


def fail(msg):
    print("check_schedule: " + msg)
    sys.exit(1)


d = sys.argv[1]
s = json.load(open(os.path.join(d, "schedule.json")))
cpp = open(os.path.join(d, "module.cpp")).read()
for key in ("format", "version", "target", "config", "ocm_peak_bytes", "lrm_peak_bytes", "ddr_bytes",
            "weights_bytes", "spills", "kernels"):
    if key not in s:
        fail("missing key " + key)
if s["format"] != "wlower-schedule" or s["version"] != 1:
    fail("bad format/version")
cfg = s["config"]
for key in ("cores", "pe_rows", "pe_cols", "macs_per_pe", "lrm_bytes", "ocm_bytes", "clock_hz", "ext_bw"):
    if key not in cfg:
        fail("config: missing " + key)
if os.path.getsize(os.path.join(d, "weights.bin")) != s["weights_bytes"]:
    fail("weights_bytes != size of weights.bin")
if s["ocm_peak_bytes"] > cfg["ocm_bytes"]:
    fail("ocm_peak_bytes > ocm_bytes")
if s["lrm_peak_bytes"] > cfg["lrm_bytes"]:
    fail("lrm_peak_bytes > lrm_bytes")

funcs = {}
for m in re.finditer(r"static void (k\d+)\(ccl::Ctx &c\)\n\{\n(.*?)\n\}\n", cpp, re.S):
    funcs[m.group(1)] = m.group(2)
dma_re = re.compile(r"ccl::dma\(c, [^,]+, [^,]+, (\d+), ccl::(DDR_TO_OCM|OCM_TO_DDR)\);")
macs = 0
ddr_names = set()
for i, k in enumerate(s["kernels"]):
    for key in ("id", "fn", "name", "op", "cpp", "split", "cores", "macs", "alu_ops", "tile", "buffers", "dma",
                "per_core"):
        if key not in k:
            fail("kernel %d: missing %s" % (i, key))
    if k["id"] != i or k["fn"] != "k%d" % i:
        fail("kernel %d: id/fn out of order" % i)
    if k["split"] not in ("rows", "cols", "heads", "none"):
        fail("kernel %d: split %s" % (i, k["split"]))
    for key in ("m", "n", "k", "count", "lrm_bytes", "double_buffered"):
        if key not in k["tile"]:
            fail("kernel %d: tile: missing %s" % (i, key))
    if k["tile"]["lrm_bytes"] > cfg["lrm_bytes"]:
        fail("kernel %d: tile lrm_bytes > lrm_bytes" % i)
    pc = k["per_core"]
    if [p["core"] for p in pc] != k["cores"] or not 1 <= len(pc) <= cfg["cores"]:
        fail("kernel %d: per_core/cores mismatch" % i)
    for f in ("macs", "alu_ops"):
        if sum(p[f] for p in pc) != k[f]:
            fail("kernel %d: per-core %s do not sum to %d" % (i, f, k[f]))
    for p in pc:
        for f in ("array_bytes", "ocm_read", "ocm_write", "ext_read", "ext_write"):
            if f not in p or p[f] < 0:
                fail("kernel %d: per_core: bad %s" % (i, f))
    macs += k["macs"]
    body = funcs.get(k["fn"])
    if body is None:
        fail("module.cpp: no function " + k["fn"])
    emitted = {"DDR_TO_OCM": 0, "OCM_TO_DDR": 0}
    for m in dma_re.finditer(body):
        emitted[m.group(2)] += int(m.group(1))
    sched = {"ddr_to_ocm": 0, "ocm_to_ddr": 0}
    for x in k["dma"]:
        if x["dir"] in sched:
            sched[x["dir"]] += x["bytes"]
    if sched["ddr_to_ocm"] != emitted["DDR_TO_OCM"] or sched["ocm_to_ddr"] != emitted["OCM_TO_DDR"]:
        fail("kernel %d: dma totals %s != module.cpp %s" % (i, sched, emitted))
    ocm = []
    for b in k["buffers"]:
        if b["role"] not in ("in", "out", "weight", "scratch") or b["mem"] not in ("ocm", "ddr"):
            fail("kernel %d: buffer %s: bad role/mem" % (i, b["value"]))
        if b["mem"] == "ocm":
            if b["offset"] % 64 or b["offset"] + b["bytes"] > s["ocm_peak_bytes"]:
                fail("kernel %d: buffer %s outside OCM peak or unaligned" % (i, b["value"]))
            ocm.append((b["offset"], b["offset"] + b["bytes"], b["value"]))
        else:
            ddr_names.add(b["value"])
    ocm.sort()
    for a, b in zip(ocm, ocm[1:]):
        if b[0] < a[1] and a[2] != b[2]:
            fail("kernel %d: OCM buffers %s and %s overlap" % (i, a[2], b[2]))
for sp in s["spills"]:
    if sp["value"] not in ddr_names or sp["reason"] != "does not fit in OCM":
        fail("spill %s not in DDR" % sp["value"])
m = re.search(r"extern \"C\" const ccl::Program wl_program = \{", cpp)
if not m or '#include "ccl.hpp"' not in cpp:
    fail("module.cpp: no wl_program / include")
print("schedule ok: %d kernels, %d MACs, %d spills, ocm_peak %d" % (len(s["kernels"]), macs, len(s["spills"]),
                                                                   s["ocm_peak_bytes"]))
