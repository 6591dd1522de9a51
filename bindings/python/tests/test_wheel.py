"""The gpumem-torch wheel: `pip wheel --no-deps --no-build-isolation bindings/python` builds it (CMake
compiles libgpumem_torch.so; no Node.js, no PyTorch), it installs into a fresh virtual environment,
and the installed package finds its own library (no GPUMEM_TORCH_LIB) and checks a configuration
without PyTorch or a GPU.

The wheel is tagged manylinux_2_28_x86_64, and its library passes native/scripts/check-glibc.sh.

Needs cmake, nvcc, the repository's `npm ci` (the glibc sysroot of native/cmake/portable.cmake) and a Python whose setuptools can make wheels (setuptools and wheel: Debian's
python3-setuptools and python3-wheel for /usr/bin/python3; the Python running the tests is tried
first). Without them the tests are skipped with the reason, unless GPUMEM_REQUIRE_WHEEL=1, which
turns the skip into a failure (CI). The build uses GPUMEM_CUDA_ARCH=90 unless the environment sets
it (one architecture keeps it short).
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
REQUIRE = os.environ.get("GPUMEM_REQUIRE_WHEEL") == "1"


def _nvcc():
    return shutil.which("nvcc") or (os.path.exists("/usr/local/cuda/bin/nvcc") and "/usr/local/cuda/bin/nvcc")


def _builder():
    """A Python whose pip, setuptools and wheel can build the wheel, and why none can."""
    reasons = []
    seen = set()
    for python in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if not python or not os.path.exists(python) or os.path.realpath(python) in seen:
            continue
        seen.add(os.path.realpath(python))
        probe = subprocess.run(
            [python, "-c", "import setuptools, wheel; print(setuptools.__version__)"], capture_output=True, text=True
        )
        if probe.returncode == 0:
            pip = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True)
            if pip.returncode == 0:
                return python, None
            probe = pip
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        reasons.append(f"{python}: {last}")
    return None, "no Python with pip, setuptools and wheel (" + "; ".join(reasons) + "); apt-get install python3-setuptools python3-wheel"


SYSROOT_PACKAGE = os.path.join(
    os.path.dirname(os.path.dirname(BINDINGS)), "node_modules", "@napi-rs", "cross-toolchain-x64-target-x86_64", "package.json"
)


def _missing():
    if shutil.which("cmake") is None:
        return "cmake is not on PATH", None
    if not os.path.exists(SYSROOT_PACKAGE):
        return "the glibc sysroot of the portable link (@napi-rs/cross-toolchain-x64-target-x86_64) is not installed: run npm ci", None
    if not _nvcc():
        return "nvcc (the CUDA toolkit) is not installed: libgpumem_torch.so needs it", None
    python, why = _builder()
    return why, python


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    env.setdefault("PATH", "/usr/bin:/bin")
    env.update(extra)
    return env


REASON, BUILDER = _missing()
if REASON:
    print(f"[test_wheel] wheel tests {'FAIL (GPUMEM_REQUIRE_WHEEL=1)' if REQUIRE else 'skipped'}: {REASON}", file=sys.stderr)


class WheelTests(unittest.TestCase):
    tmp = None
    wheel = None
    venv_python = None

    @classmethod
    def setUpClass(cls):
        if REASON:
            if REQUIRE:
                raise AssertionError(f"GPUMEM_REQUIRE_WHEEL=1 but the wheel cannot be built here: {REASON}")
            raise unittest.SkipTest(REASON)
        cls.tmp = tempfile.mkdtemp(prefix="gpumem-wheel-")
        dist = os.path.join(cls.tmp, "dist")
        env = _clean_env(
            GPUMEM_CUDA_ARCH=os.environ.get("GPUMEM_CUDA_ARCH") or "90",
            GPUMEM_TORCH_BUILD_DIR=os.path.join(cls.tmp, "cmake"),
            CMAKE_BUILD_PARALLEL_LEVEL=os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or "2",
            PIP_NO_INDEX="1",
        )
        # The documented command, run from the repository root with the builder's pip.
        repo = os.path.dirname(os.path.dirname(BINDINGS))
        build = subprocess.run(
            [BUILDER, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", dist, "bindings/python"],
            cwd=repo, capture_output=True, text=True, env=env, timeout=1200,
        )
        if build.returncode != 0:
            raise AssertionError(f"pip wheel failed (exit {build.returncode}):\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}")
        wheels = glob.glob(os.path.join(dist, "gpumem_torch-*.whl"))
        if len(wheels) != 1:
            raise AssertionError(f"expected one wheel in {dist}, found {wheels}")
        cls.wheel = wheels[0]
        venv = os.path.join(cls.tmp, "venv")
        made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], capture_output=True, text=True)
        if made.returncode != 0:
            why = f"python3 -m venv failed (python3-venv missing?): {made.stderr.strip()[-500:]}"
            if REQUIRE:
                raise AssertionError(why)
            raise unittest.SkipTest(why)
        cls.venv_python = os.path.join(venv, "bin", "python")
        install = subprocess.run(
            [cls.venv_python, "-m", "pip", "install", "--no-deps", "--no-index", cls.wheel],
            capture_output=True, text=True, env=_clean_env(), timeout=300,
        )
        if install.returncode != 0:
            raise AssertionError(f"pip install of the wheel failed:\n{install.stdout[-3000:]}\n{install.stderr[-3000:]}")

    @classmethod
    def tearDownClass(cls):
        if cls.tmp:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def installed(self, code, **env):
        """Runs `code` with the virtual environment's Python, outside the repository."""
        proc = subprocess.run(
            [self.venv_python, "-c", code], capture_output=True, text=True, cwd=self.tmp, env=_clean_env(**env), timeout=120
        )
        self.assertEqual(proc.returncode, 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def test_wheel_name_and_contents(self):
        name = os.path.basename(self.wheel)
        self.assertRegex(name, r"^gpumem_torch-\d+\.\d+\.\d+-py3-none-manylinux_2_28_x86_64\.whl$")
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            wheel_file = next(n for n in names if n.endswith(".dist-info/WHEEL"))
            wheel_meta = z.read(wheel_file).decode()
        self.assertIn("Tag: py3-none-manylinux_2_28_x86_64\n", wheel_meta)
        self.assertIn("Root-Is-Purelib: false\n", wheel_meta)
        for member in ("gpumem_torch/__init__.py", "gpumem_torch/_allocator.py", "gpumem_torch/_library.py",
                       "gpumem_torch/_stats.py", "gpumem_torch/lib/libgpumem_torch.so"):
            self.assertIn(member, names)
        # setuptools puts it at dist-info/LICENSE, or dist-info/licenses/LICENSE from version 68
        self.assertTrue(any(".dist-info/" in n and n.endswith("/LICENSE") for n in names), names)
        self.assertFalse(any(n.startswith("tests/") or n.endswith("seed_gcn.py") for n in names), names)

    def test_packed_library_needs_glibc_2_28_at_most_and_no_libstdcxx(self):
        # What the manylinux_2_28 tag promises, checked on the library as packed (native/scripts/check-glibc.sh).
        with zipfile.ZipFile(self.wheel) as z:
            library = z.extract("gpumem_torch/lib/libgpumem_torch.so", os.path.join(self.tmp, "unpacked"))
        script = os.path.join(os.path.dirname(os.path.dirname(BINDINGS)), "native", "scripts", "check-glibc.sh")
        check = subprocess.run(["bash", script, library], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertRegex(check.stdout, r"check-glibc: ok .*libgpumem_torch\.so: glibc 2\.\d+ at most, no GLIBCXX/CXXABI")
        self.assertNotIn("libstdc++", check.stdout)

    def test_installed_package_finds_its_library_and_checks_a_configuration(self):
        r = self.installed(
            "import json, sys, gpumem_torch\n"
            "print(json.dumps({'file': gpumem_torch.__file__, 'lib': gpumem_torch.library_path(),\n"
            "  'config': gpumem_torch.check_config(), 'tiered': gpumem_torch.describe('tiered', device_budget='4GiB'),\n"
            "  'torch': 'torch' in sys.modules, 'prefix': sys.prefix}))\n"
        )
        self.assertTrue(r["file"].startswith(r["prefix"]), r)
        self.assertEqual(r["lib"], os.path.join(os.path.dirname(r["file"]), "lib", "libgpumem_torch.so"))
        self.assertEqual(r["config"], "strategy=expandable expandable.unmap_idle_before_growth=0 oom=raise")
        self.assertEqual(r["tiered"], f"strategy=tiered tiered.device_budget={4 << 30} tiered.host_budget=default tiered.placement=auto oom=raise")
        self.assertFalse(r["torch"], "importing gpumem_torch and checking a configuration must not import PyTorch")

    def test_gpumem_torch_lib_still_overrides(self):
        r = self.installed(
            "import json, gpumem_torch\n"
            "try:\n"
            "    gpumem_torch.check_config(); out = {'raised': None}\n"
            "except FileNotFoundError as e:\n"
            "    out = {'raised': str(e)}\n"
            "out['lib'] = gpumem_torch.library_path()\n"
            "print(json.dumps(out))\n",
            GPUMEM_TORCH_LIB="/nonexistent/libgpumem_torch.so",
        )
        self.assertEqual(r["lib"], "/nonexistent/libgpumem_torch.so")
        self.assertIn("/nonexistent/libgpumem_torch.so ($GPUMEM_TORCH_LIB)", r["raised"])

    def test_bad_configuration_from_the_installed_package(self):
        r = self.installed(
            "import json, gpumem_torch\n"
            "try:\n"
            "    gpumem_torch.check_config('pol'); out = {}\n"
            "except ValueError as e:\n"
            "    out = {'error': str(e)}\n"
            "out['config'] = gpumem_torch.check_config('uvm')\n"
            "print(json.dumps(out))\n"
        )
        self.assertIn("GPUMEM_ALLOCATOR='pol'", r["error"])
        self.assertTrue(r["config"].startswith("strategy=uvm "))


if __name__ == "__main__":
    unittest.main(verbosity=2)
