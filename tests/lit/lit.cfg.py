# lit configuration for wlower. Run through meson (`meson test --suite lit`)
# or by hand:
#   /usr/lib/llvm-19/build/utils/lit/lit.py -sv --param wlower=build/wlower tests/lit
import os
import lit.formats

config.name = "wlower"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".onnxtxt"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)

llvm_bin = "/usr/lib/llvm-19/bin"
wlower = lit_config.params.get("wlower")
if not wlower:
    lit_config.fatal("pass --param wlower=/path/to/build/wlower")
wlower = os.path.abspath(wlower)
if not os.access(wlower, os.X_OK):
    lit_config.fatal("wlower binary not found or not executable: " + wlower)
for tool in ("FileCheck", "not", "count", "split-file"):
    if not os.access(os.path.join(llvm_bin, tool), os.X_OK):
        lit_config.fatal(tool + " not found in " + llvm_bin + " (apt-get install llvm-19-tools)")

config.test_exec_root = lit_config.params.get(
    "exec_root", os.path.join(os.path.dirname(wlower), "tests", "lit-out"))
config.environment["PATH"] = os.pathsep.join(
    [llvm_bin, os.path.dirname(wlower), config.environment.get("PATH", "/usr/bin:/bin")])
config.substitutions.append(("%wlower", wlower))
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
