"""The gpumem-torch sdist and wheel: `python3 setup.py sdist` in bindings/python makes
gpumem_torch-<version>.tar.gz with the native sources inside, and `pip wheel --no-deps
--no-build-isolation` of that sdist, unpacked in a folder away from the repository, builds the wheel
from it alone (CMake compiles libgpumem_torch.so; no Node.js, no PyTorch). The wheel installs into a
fresh virtual environment, and the installed package finds its own library (no GPUMEM_TORCH_LIB)
and checks a configuration without PyTorch or a GPU. The sdist's and the wheel's metadata are what
PyPI shows, and the file names are those README.md, docs/torch.md and bindings/python/README.md
tell users to install.

The wheel is tagged manylinux_2_28_x86_64, and its library passes native/scripts/check-glibc.sh:
the unpacked sdist is given the repository's node_modules (a link) for the glibc sysroot of the
portable link, the one thing of the repository it uses. One build serves every test: the sdist's
wheel is the wheel.

Needs cmake, nvcc, the repository's `npm ci` (the glibc sysroot of native/cmake/portable.cmake) and a Python whose setuptools can make wheels (setuptools and wheel: Debian's
python3-setuptools and python3-wheel for /usr/bin/python3; the Python running the tests is tried
first). Without them the tests are skipped with the reason, unless GPUMEM_REQUIRE_WHEEL=1, which
turns the skip into a failure (CI). The build uses GPUMEM_CUDA_ARCH=90 unless the environment sets
it (one architecture keeps it short).
"""

import glob
import json
import re
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(BINDINGS))
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
    sdist = None
    sdist_root = None
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
        # The sdist, made in the repository (its egg-info outside the tree) ...
        made = subprocess.run(
            [BUILDER, "setup.py", "-q", "egg_info", "--egg-base", cls.tmp, "sdist", "-d", dist],
            cwd=BINDINGS, capture_output=True, text=True, env=env, timeout=300,
        )
        if made.returncode != 0:
            raise AssertionError(f"setup.py sdist failed (exit {made.returncode}):\n{made.stdout[-4000:]}\n{made.stderr[-4000:]}")
        sdists = glob.glob(os.path.join(dist, "*.tar.gz"))
        if len(sdists) != 1:
            raise AssertionError(f"expected one sdist in {dist}, found {sdists}")
        cls.sdist = sdists[0]
        # ... unpacked in a folder of its own, away from the repository, which builds the wheel from it alone.
        away = os.path.join(cls.tmp, "away")
        with tarfile.open(cls.sdist) as archive:
            archive.extractall(away, filter="data")
        (cls.sdist_root,) = glob.glob(os.path.join(away, "gpumem_torch-*"))
        os.symlink(os.path.join(REPO, "node_modules"), os.path.join(cls.sdist_root, "node_modules"))
        build = subprocess.run(
            [BUILDER, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", dist, cls.sdist_root],
            cwd=away, capture_output=True, text=True, env=env, timeout=1200,
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

    def test_sdist_carries_the_native_sources_and_the_metadata(self):
        self.assertRegex(os.path.basename(self.sdist), r"^gpumem_torch-\d+\.\d+\.\d+\.tar\.gz$")  # PEP 625's name
        root = os.path.basename(self.sdist)[: -len(".tar.gz")]
        with tarfile.open(self.sdist) as archive:
            names = set(archive.getnames())
            pkg_info = archive.extractfile(f"{root}/PKG-INFO").read().decode()
        for member in ("setup.py", "pyproject.toml", "LICENSE", "gpumem_torch/__init__.py", "gpumem_torch/py.typed",
                       "native/CMakeLists.txt", "native/cmake/portable.cmake", "native/scripts/check-glibc.sh",
                       "native/src/torch/CMakeLists.txt", "native/include/gpumem/chain_builder.hpp"):
            self.assertIn(f"{root}/{member}", names)
        # nothing of the Node addon's build or of the repository's tests
        self.assertFalse([n for n in names if "/native/build" in n or "/native/tests/" in n or "node_modules" in n])
        self.assert_metadata(pkg_info)

    def assert_metadata(self, text):
        """What PyPI shows of the package: the headers of PKG-INFO or METADATA."""
        headers = text.split("\n\n", 1)[0]
        fields = {}
        for line in headers.splitlines():
            key, _, value = line.partition(": ")
            fields.setdefault(key, []).append(value)
        self.assertEqual(fields["Name"], ["gpumem-torch"])
        # the SPDX identifier: License-Expression from setuptools 77 on, License before
        self.assertIn("Apache-2.0", fields.get("License-Expression", []) + fields.get("License", []))
        self.assertEqual(fields["Requires-Python"], [">=3.11"])
        for classifier in ("Typing :: Typed", "Programming Language :: Python :: 3 :: Only", "Programming Language :: Python :: 3.11",
                           "Operating System :: POSIX :: Linux", "Environment :: GPU :: NVIDIA CUDA"):
            self.assertIn(classifier, fields["Classifier"])
        self.assertFalse([c for c in fields["Classifier"] if re.search(r"Python :: 3\.([0-9]|10)$", c)], "no end-of-life Python")
        urls = dict(u.split(", ", 1) for u in fields["Project-URL"])
        self.assertEqual(sorted(urls), ["Changelog", "Documentation", "Homepage", "Issues", "Source"])
        self.assertTrue(all(u.startswith("https://github.com/gpumem/gpumem") for u in urls.values()), urls)

    def test_wheel_metadata(self):
        with zipfile.ZipFile(self.wheel) as z:
            metadata = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            self.assert_metadata(z.read(metadata).decode())

    def test_documented_file_names_are_those_the_build_makes(self):
        # Every gpumem_torch-<version>... file name the docs give is the wheel's or the sdist's (a
        # glob may stand for the version and tags).
        made = {os.path.basename(self.wheel), os.path.basename(self.sdist)}
        version = os.path.basename(self.sdist)[len("gpumem_torch-"): -len(".tar.gz")]
        quoted = 0
        for doc in ("README.md", os.path.join("docs", "torch.md"), os.path.join("bindings", "python", "README.md")):
            with open(os.path.join(REPO, doc), encoding="utf-8") as f:
                text = f.read()
            for name in re.findall(r"gpumem_torch-[\w.*<>-]+?\.(?:whl|tar\.gz)", text):
                name = name.replace("<version>", version)
                pattern = "^" + re.escape(name).replace(r"\*", ".*") + "$"
                self.assertTrue(any(re.match(pattern, m) for m in made), f"{doc}: {name} is not what the build makes ({sorted(made)})")
                quoted += 1
        self.assertGreaterEqual(quoted, 4)

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
