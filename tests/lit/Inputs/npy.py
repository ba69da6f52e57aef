#!/usr/bin/python3
"""npy.py OUT DTYPE SHAPE [FILL] — write a .npy for the lit tests.

SHAPE is comma-separated ("1,80,3000"; "" for a scalar). FILL: a number (every
element), "arange" (0, 1, 2, ... ), "randn" (seeded normal), or a
comma-separated list of values. DTYPE: any numpy dtype name.
Also: npy.py --fortran OUT DTYPE SHAPE writes Fortran order; npy.py --pb OUT
DTYPE SHAPE FILL writes an ONNX TensorProto instead.
"""
import sys

import numpy as np

args = sys.argv[1:]
fortran = pb = False
while args and args[0].startswith("--"):
    fortran |= args[0] == "--fortran"
    pb |= args[0] == "--pb"
    args = args[1:]
out, dtype, shape = args[0], args[1], args[2]
fill = args[3] if len(args) > 3 else "arange"
dims = tuple(int(s) for s in shape.split(",") if s != "")
n = int(np.prod(dims)) if dims else 1
if fill == "arange":
    a = np.arange(n).reshape(dims)
elif fill == "randn":
    a = np.random.default_rng(0).standard_normal(n).reshape(dims)
elif "," in fill:
    a = np.array([float(v) for v in fill.split(",")]).reshape(dims)
else:
    a = np.full(dims, float(fill))
a = a.astype(dtype)
if pb:
    from onnx import numpy_helper
    with open(out, "wb") as f:
        f.write(numpy_helper.from_array(a, "t").SerializeToString())
elif fortran:
    np.save(out, np.asfortranarray(a) if a.ndim > 1 else a)
else:
    np.save(out, a)
