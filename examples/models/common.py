"""Shared helpers for the wlower model generators (whisper.py, qwen2.py, samples.py).

Run the generators with Debian's /usr/bin/python3 (python3-torch 1.13, python3-onnx 1.12).

Seeding: every parameter gets its own generator seeded from (seed, crc32(parameter name)),
so a parameter's values do not depend on how many layers the model has or on the order
in which modules were created: `--layers 1` gives the same layer 0 as `--layers 4`.
"""

import collections
import os
import sys
import time
import zlib

import numpy as np


def rng_for(seed, name):
    """numpy Generator for one named tensor."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(name.encode())])


def normal(seed, name, shape, std, mean=0.0):
    g = rng_for(seed, name)
    a = g.standard_normal(size=shape, dtype=np.float32)
    a *= np.float32(std)
    if mean:
        a += np.float32(mean)
    return a


def frequent_token_ids(seed, vocab, count, extra=(), low=5000):
    """A seeded set of `count` "frequent" token ids drawn from the low ranks of the vocabulary
    (BPE ranks: low ids are the common tokens), plus `extra` ids that exist in the vocabulary."""
    g = rng_for(seed, "frequent_tokens")
    pool = min(vocab, low)
    count = min(count, pool)
    ids = set(int(i) for i in g.choice(pool, size=count, replace=False))
    ids.update(int(i) for i in extra if 0 <= int(i) < vocab)
    return np.array(sorted(ids), dtype=np.int64)


def boost_rows(table, seed, ids, lo=4.0, hi=6.0, name="frequent_boost"):
    """Scale rows `ids` of `table` [vocab, d] by seeded factors in [lo, hi] (in place)."""
    g = rng_for(seed, name)
    f = g.uniform(lo, hi, size=len(ids)).astype(np.float32)
    table[ids] *= f[:, None]
    return f


def op_histogram(model):
    """{ 'domain::Op' or 'Op': count } over the main graph."""
    c = collections.Counter()
    for n in model.graph.node:
        c[(n.domain + "::" if n.domain and n.domain != "ai.onnx" else "") + n.op_type] += 1
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def describe(path, check=True):
    """Load, check and summarize one .onnx file: returns a printable string."""
    import onnx

    size = os.path.getsize(path)
    data = path + ".data"
    if os.path.exists(data):
        size += os.path.getsize(data)
    if check:
        onnx.checker.check_model(path)
    m = onnx.load(path, load_external_data=False)
    nparams = 0
    for t in m.graph.initializer:
        k = 1
        for d in t.dims:
            k *= d
        nparams += k

    def vi(v):
        tt = v.type.tensor_type
        dims = [d.dim_param if d.dim_param else d.dim_value for d in tt.shape.dim]
        import onnx.mapping as mp
        return "%s %s%s" % (v.name, mp.TENSOR_TYPE_TO_NP_TYPE[tt.elem_type].name, dims)

    lines = [
        "%s: %.1f MB, opset %s, %d nodes, %d initializers (%.2fM values)"
        % (path, size / 1e6, ",".join("%s:%d" % (o.domain or "ai.onnx", o.version) for o in m.opset_import),
           len(m.graph.node), len(m.graph.initializer), nparams / 1e6),
        "  inputs:  " + "; ".join(vi(v) for v in m.graph.input),
        "  outputs: " + "; ".join(vi(v) for v in m.graph.output),
        "  ops: " + ", ".join("%s %d" % kv for kv in op_histogram(m).items()),
    ]
    return "\n".join(lines)


def untie_transposed_copies(path, pairs):
    """torch.onnx.export folds `x @ W.t()` for a weight W that is also used elsewhere (a tied
    LM head) into a second, transposed initializer: the file then holds the embedding twice.
    For each (weight_name, array W) in `pairs`, find an initializer equal to W.T, drop it and
    compute it with a Transpose of the original initializer instead (what the export gives with
    constant folding off). Rewrites `path` in place; returns the number of copies removed."""
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.load(path)
    g = m.graph
    by_name = {t.name: t for t in g.initializer}
    removed = 0
    for wname, w in pairs:
        if wname not in by_name:
            continue
        shape_t = [w.shape[1], w.shape[0]]
        for t in list(g.initializer):
            if t.name == wname or list(t.dims) != shape_t:
                continue
            a = numpy_helper.to_array(t)
            if not np.array_equal(a, w.T):
                continue
            new_name = t.name
            g.initializer.remove(t)
            # the Transpose must come before its first consumer: put it first
            node = helper.make_node("Transpose", [wname], [new_name], perm=[1, 0],
                                    name="/lm_head/Transpose_tied")
            g.node.insert(0, node)
            removed += 1
            break
    if removed:
        onnx.save(m, path)
    return removed


def input_to_initializer(path, name, array):
    """Turn graph input `name` of the model at `path` into an initializer holding `array`
    (rewrites `path`). Lets torch export a huge weight as an input, which is much faster."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(path)
    g = m.graph
    inp = [i for i in g.input if i.name == name]
    if len(inp) != 1:
        raise ValueError("%s: no graph input %s" % (path, name))
    g.input.remove(inp[0])
    g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
    tmp = path + ".tmp"
    onnx.save(m, tmp)
    os.replace(tmp, path)


def dequantized_input(path, name, scale, new_name):
    """Graph input `name` (float) of the model at `path` becomes int8 input `new_name` of the same
    shape read through DequantizeLinear(new_name, scale, 0) (rewrites `path`): the vendor's
    single-token Qwen2 graph takes its past K/V this way (`past_key_values.0.key_quantized`)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.load(path)
    g = m.graph
    inp = [i for i in g.input if i.name == name]
    if len(inp) != 1:
        raise ValueError("%s: no graph input %s" % (path, name))
    q = helper.make_tensor_value_info(new_name, TensorProto.INT8,
                                      [d.dim_value or d.dim_param for d in inp[0].type.tensor_type.shape.dim])
    pos = list(g.input).index(inp[0])
    g.input.remove(inp[0])
    g.input.insert(pos, q)
    g.initializer.append(numpy_helper.from_array(np.array(scale, np.float32), new_name + "_scale"))
    g.initializer.append(numpy_helper.from_array(np.array(0, np.int8), new_name + "_zero_point"))
    g.node.insert(0, helper.make_node("DequantizeLinear", [new_name, new_name + "_scale", new_name + "_zero_point"],
                                      [name], name="/" + new_name + "/DequantizeLinear"))
    tmp = path + ".tmp"
    onnx.save(m, tmp)
    os.replace(tmp, path)


class Timer:
    def __init__(self, what):
        self.what = what

    def __enter__(self):
        self.t = time.time()
        return self

    def __exit__(self, *a):
        self.dt = time.time() - self.t
        print("%s: %.1f s" % (self.what, self.dt), file=sys.stderr)


def export(module, args, path, input_names, output_names, opset, dynamic_axes=None):
    """torch.onnx.export with the settings the generators share (eval, constant folding,
    static shapes unless dynamic_axes). Writes to path+'.tmp' and renames."""
    import torch

    module.eval()
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(
            module, args, tmp,
            input_names=input_names, output_names=output_names,
            opset_version=opset, do_constant_folding=True,
            dynamic_axes=dynamic_axes,
        )
    os.replace(tmp, path)


def fix_dims(path, values):
    """Optimum-style static shape fixing (onnxruntime.tools.make_dynamic_shape_fixed): replace
    every symbolic dim named in `values` ({dim_param: int}) by its value, in the graph inputs,
    outputs and value_info of the model at `path` (rewritten in place). The nodes keep the
    Shape/Gather/Unsqueeze/Concat chains a dynamic_axes export computes reshape targets with."""
    import onnx

    m = onnx.load(path)
    g = m.graph
    for v in list(g.input) + list(g.output) + list(g.value_info):
        for d in v.type.tensor_type.shape.dim:
            if d.dim_param in values:
                d.dim_value = int(values[d.dim_param])
    tmp = path + ".tmp"
    onnx.save(m, tmp)
    os.replace(tmp, path)


def dynamic_axes_for(names, axes):
    """{name: {axis: dim_param}} for the names that have an entry in `axes` (a function of the
    name returning {axis: dim_param} or None)."""
    out = {}
    for n in names:
        a = axes(n)
        if a:
            out[n] = a
    return out
