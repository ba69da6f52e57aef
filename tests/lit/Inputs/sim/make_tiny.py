#!/usr/bin/env python3
"""Writes a tiny hand-made Chimera module folder for the `wlower sim` tests:
module.cpp (two kernels: a 1x8·8x4 fixed-point matmul split over 2 cores and
a ReLU on core 0, with their DMAs), weights.bin, schedule.json, manifest.json,
plus x.npy (input) and y_ref.npy (the exact output [17.5, 10.5, 3.5, 0]).

usage: make_tiny.py DIR [--bad-macs] [--bad-dma] [--bad-cpp] [--tamper] [--no-per-core] [--bad-core]
"""
import hashlib, json, os, struct, sys

out = sys.argv[1]
flags = set(sys.argv[2:])
os.makedirs(out, exist_ok=True)

F = 16
W = [[int((i - 2 * j) * 0.25 * (1 << F)) for j in range(4)] for i in range(8)]
weights = b"".join(struct.pack("<i", W[i][j]) for i in range(8) for j in range(4))

macs_counted = 32 if "--bad-macs" not in flags else 31
dma_w = 128 if "--bad-dma" not in flags else 64
module = r'''// tiny test module (tests/lit/Inputs/sim/make_tiny.py)
#include "ccl.hpp"

// /mm ai.wlower.MatMulNBits [1,8]x[8,4] F16, split cols over cores 0,1
static void k0(ccl::Ctx &c)
{
	ccl::dma(c, c.ocm + 0, c.w + 0, 128, ccl::DDR_TO_OCM);
	ccl::dma(c, c.ocm + 128, c.ddr + 0, 32, ccl::DDR_TO_OCM);
	const int32_t *x = (const int32_t *)(c.ocm + 128), *w = (const int32_t *)(c.ocm + 0);
	int32_t *y = (int32_t *)(c.ocm + 160);
	for (int j = 0; j < 4; j++) {
		int64_t acc = 0;
		for (int i = 0; i < 8; i++)
			acc += (int64_t)x[i] * w[i * 4 + j];
		y[j] = (int32_t)((acc + (1 << 15)) >> 16);
	}
	c.macs += MACS;
}

// /relu Relu [1,4] F16, core 0
static void k1(ccl::Ctx &c)
{
	int32_t *y = (int32_t *)(c.ocm + 160);
	for (int j = 0; j < 4; j++)
		y[j] = y[j] < 0 ? 0 : y[j];
	c.alu += 4;
	ccl::dma(c, c.ddr + 32, c.ocm + 160, 16, ccl::OCM_TO_DDR);
}

static const ccl::IO inputs[] = {{"x", "float32", 16, 2, {1, 8}, ccl::MEM_DDR, 0, 32}};
static const ccl::IO outputs[] = {{"y", "float32", 16, 2, {1, 4}, ccl::MEM_DDR, 32, 16}};
static const ccl::Kernel kernels[] = {
	{"/mm", "ai.wlower.MatMulNBits", k0, 32},
	{"/relu", "Relu", k1, 0},
};
extern "C" const ccl::Program wl_program = {
	"tiny", {"qc-p", 2, 16, 16, 16, 4096, 1048576, 1.7e9, 1.28e11},
	256, 64, 128, 1, inputs, 1, outputs, 2, kernels};
'''.replace("MACS", str(macs_counted))
if "--bad-cpp" in flags:
    module += "\nthis is not C++;\n"

schedule = {
    "format": "wlower-schedule", "version": 1, "target": "qc-p",
    "config": {"cores": 2, "pe_rows": 16, "pe_cols": 16, "macs_per_pe": 16, "lrm_bytes": 4096,
               "ocm_bytes": 1048576, "clock_hz": 1.7e9, "ext_bw": 1.28e11},
    "ocm_peak_bytes": 176, "lrm_peak_bytes": 96, "ddr_bytes": 64, "weights_bytes": 128,
    "spills": [],
    "kernels": [
        {"id": 0, "fn": "k0", "name": "/mm", "op": "ai.wlower.MatMulNBits", "cpp": "linalg::matMulNBits",
         "split": "cols", "cores": [0, 1], "macs": 32, "alu_ops": 0,
         "tile": {"m": 1, "n": 2, "k": 8, "count": 1, "lrm_bytes": 96, "double_buffered": True},
         "buffers": [],
         "dma": [{"dir": "ddr_to_ocm", "bytes": dma_w, "what": "weights"},
                 {"dir": "ddr_to_ocm", "bytes": 32, "what": "activations"},
                 {"dir": "ocm_to_lrm", "bytes": 160, "what": "activations"}],
         "per_core": [
             {"core": 0, "macs": 16, "alu_ops": 0, "array_bytes": 64, "ocm_read": 96, "ocm_write": 8,
              "ext_read": 80, "ext_write": 0},
             {"core": 1, "macs": 16, "alu_ops": 0, "array_bytes": 64, "ocm_read": 96, "ocm_write": 8,
              "ext_read": 80, "ext_write": 0}]},
        {"id": 1, "fn": "k1", "name": "/relu", "op": "Relu", "cpp": "nn::relu",
         "split": "none", "cores": [0], "macs": 0, "alu_ops": 4,
         "tile": {"m": 1, "n": 4, "k": 1, "count": 1, "lrm_bytes": 16, "double_buffered": False},
         "buffers": [],
         "dma": [{"dir": "ocm_to_ddr", "bytes": 16, "what": "activations"}],
         "per_core": [
             {"core": 0, "macs": 0, "alu_ops": 4, "array_bytes": 0, "ocm_read": 16, "ocm_write": 16,
              "ext_read": 0, "ext_write": 16}]},
    ]}

if "--no-per-core" in flags:
    del schedule["kernels"][1]["per_core"]
if "--bad-core" in flags:
    schedule["kernels"][0]["per_core"][1]["core"] = 7
files = {"module.cpp": module.encode(), "weights.bin": weights,
         "schedule.json": (json.dumps(schedule, indent=1) + "\n").encode()}
for name, data in files.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
manifest = {
    "format": "wlower-module", "version": 1, "wlower_version": "0.1.0", "model": "tests/tiny.onnx",
    "target": "qc-p", "hardware": dict(schedule["config"]), "fuse": {}, "passes": [],
    "programs": [{"name": "main", "kernels": len(schedule["kernels"]),
                  "ocm_peak_bytes": schedule["ocm_peak_bytes"],
                  "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 8], "format": "fixed", "frac_bits": 16}],
                  "outputs": [{"name": "y", "dtype": "float32", "shape": [1, 4], "format": "fixed", "frac_bits": 16}],
                  "op_counts": {"Relu": 1, "ai.wlower.MatMulNBits": 1}}],
    "files": [{"name": n, "bytes": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files.items()],
    "compile_ms": 0}
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
if "--tamper" in flags:
    with open(os.path.join(out, "weights.bin"), "r+b") as f:
        f.write(b"\1")


def npy(path, vals, shape):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % ", ".join(map(str, shape))
    hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%df" % len(vals), *vals))


npy(os.path.join(out, "x.npy"), [i * 0.5 for i in range(8)], [1, 8])
npy(os.path.join(out, "y_ref.npy"), [17.5, 10.5, 3.5, 0.0], [1, 4])
npy(os.path.join(out, "y_off.npy"), [17.5, 10.5, 3.5, 0.5], [1, 4])
