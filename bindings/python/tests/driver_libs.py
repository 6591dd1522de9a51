"""The test drivers of native/tests/driver/, built with the system C compiler: libfake_cuda.so (an
interposer that reports an older CUDA driver than the real one and hides what came after it) and
libmock_cuda.so (a stand-in libcuda.so.1 with no device, for machines without a driver)."""
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOURCES = os.path.join(ROOT, "native", "tests", "driver")

_built = {}


def compiler_reason():
    """None when a C compiler (cc, or $CC) is on PATH, else the reason (for a skip message)."""
    cc = os.environ.get("CC") or "cc"
    return None if shutil.which(cc) else f"no C compiler ({cc}) to build the test drivers"


def build(name):
    """The path of lib<name>.so built from native/tests/driver/<name>.c (once per process)."""
    if name not in _built:
        out = os.path.join(tempfile.mkdtemp(prefix="gpumem-driver-"), f"lib{name}.so")
        cc = os.environ.get("CC") or "cc"
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", out, os.path.join(SOURCES, f"{name}.c"), "-ldl"], check=True)
        _built[name] = out
    return _built[name]
