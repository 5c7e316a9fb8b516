"""For tests that load the simulated libnvidia-ml.so.1 into Python with ctypes: an AddressSanitizer
build of the library needs the sanitizer's runtime loaded before anything else, which Python is
not built with. `preload(module)` runs the test module again with it preloaded (and leak checking
off, since Python does not free everything at exit); it returns at once for a normal build."""
import os
import re
import subprocess
import sys


def preload(module):
    lib = os.environ.get("GPUMETER_SIM_LIB", "")
    if not lib or os.environ.get("LD_PRELOAD"):
        return
    deps = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    m = re.search(r"libasan\.so\S* => (\S+)", deps)
    if not m:
        return
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = dict(os.environ, LD_PRELOAD=m.group(1),
               ASAN_OPTIONS=asan + (":" if asan else "") + "detect_leaks=0")
    os.execve(sys.executable, [sys.executable, "-m", "unittest", "-v", module], env)
