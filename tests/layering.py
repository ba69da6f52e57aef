#!/usr/bin/python3
"""layering.py — folders are layers (docs/DESIGN.md "Layout"): a source file may
include headers of its own folder and of folders in LOWER layers, never of a
folder in a higher layer, and never of a different folder in the SAME layer
(the two targets do not know each other).

The layers, bottom to top (one row a layer; folders on one row are peers):

    compiler/ir                       the IR, diagnostics, files
    compiler/onnx                     ONNX import/export, textual syntax
    runtime/interp                    the float reference executor
    tranges                           ranges and calibration (the numerics pass reads them)
    passes                            pass manager, matchers, passes
    runtime/module                    the module-directory contract
    targets                           what every target shares (target.h)
    targets/chimera targets/host      the two targets (peers)
    runtime/rt                        the deployable host runtime
    runtime/pipelines                 whisper and llm loops over compiled programs
    compiler/driver                   the wlower command

A file belongs to the deepest listed folder that contains it (targets/chimera/
sim/ is targets/chimera). Includes are resolved like the compiler does (the
including file's folder, then the repository root); system headers (<...>) and
generated ones (onnx.pb-c.h) are not checked. tests/, bench/ and examples/ may
include anything.

usage: layering.py [ROOT]     exit 0 when no include points up (or sideways);
                               1 and one line per bad include otherwise.
       layering.py --selftest  shows the check fails on a deliberate upward and
                               sideways include, and passes on allowed ones.
"""
import os
import re
import sys

LAYERS = [
    ["compiler/ir"],
    ["compiler/onnx"],
    ["runtime/interp"],
    ["tranges"],
    ["passes"],
    ["runtime/module"],
    ["targets"],
    ["targets/chimera", "targets/host"],
    ["runtime/rt"],
    ["runtime/pipelines"],
    ["compiler/driver"],
]
RANK = {f: i for i, row in enumerate(LAYERS) for f in row}
CHECKED = tuple(RANK)
EXTS = (".c", ".h", ".cpp", ".hpp", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(rel):
    """The deepest layer folder containing rel (a path relative to the root), or None."""
    best = None
    for f in RANK:
        if rel == f or rel.startswith(f + "/"):
            if best is None or len(f) > len(best):
                best = f
    return best


def check(root):
    bad = []
    nfiles = 0
    for top in ("compiler", "runtime", "passes", "tranges", "targets"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith(EXTS):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                src = folder_of(rel)
                if src is None:
                    continue
                nfiles += 1
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    line = text.count("\n", 0, m.start()) + 1
                    cand = [os.path.normpath(os.path.join(os.path.dirname(rel), inc)), os.path.normpath(inc)]
                    target = next((c for c in cand if os.path.exists(os.path.join(root, c))), None)
                    if target is None:
                        continue        # generated (onnx.pb-c.h) or system
                    dst = folder_of(target)
                    if dst is None or dst == src:
                        continue
                    if RANK[dst] > RANK[src]:
                        bad.append("%s:%d: includes \"%s\" (%s, layer %d) from %s (layer %d): upward"
                                   % (rel, line, inc, dst, RANK[dst], src, RANK[src]))
                    elif RANK[dst] == RANK[src]:
                        bad.append("%s:%d: includes \"%s\" (%s) from its peer %s: sideways"
                                   % (rel, line, inc, dst, src))
    return nfiles, bad


def selftest():
    import tempfile
    files = {
        "compiler/ir/ir.h": "",
        "passes/passes.h": '#include "compiler/ir/ir.h"\n',
        "targets/chimera/chimera.h": '#include "passes/passes.h"\n',
        "targets/host/hostgen.h": "",
        "compiler/driver/main.c": '#include "targets/host/hostgen.h"\n#include "passes/passes.h"\n',
        "compiler/ir/bad_up.c": '#include "ir.h"\n#include "passes/passes.h"\n',
        "targets/host/bad_side.c": '#include "hostgen.h"\n#include "../chimera/chimera.h"\n',
    }
    want = {("compiler/ir/bad_up.c", "upward"), ("targets/host/bad_side.c", "sideways")}
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as fh:
                fh.write(text)
        _, bad = check(root)
    got = {(b.split(":")[0], b.rsplit(": ", 1)[1]) for b in bad}
    ok = got == want and len(bad) == 2
    print("layering selftest: %s (found: %s)" % ("ok" if ok else "FAILED", "; ".join(bad) or "nothing"))
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    nfiles, bad = check(root)
    for b in bad:
        print("layering: " + b)
    if nfiles == 0:
        print("layering: no source files found under %s" % root)
        return 1
    print("layering: %d files, %d bad includes" % (nfiles, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
