"""Builds the gpumem-torch wheel: the gpumem_torch package plus libgpumem_torch.so, compiled by
CMake from gpumem's native/ folder (target gpumem_torch only; no Node.js, no PyTorch): the
repository's, or the copy inside the sdist, which builds the wheel on its own.

    pip wheel --no-deps --no-build-isolation bindings/python      # from the repository root
    python3 setup.py sdist                                        # the sdist, native/ sources inside
    pip wheel --no-deps --no-build-isolation gpumem_torch-X.tar.gz   # a wheel from the sdist alone

Environment:
  GPUMEM_CUDA_ARCH         CUDA architectures, e.g. "90" or "80;90" (default: native/CMakeLists.txt's)
  GPUMEM_NATIVE_DIR        the native/ folder (default: native/ beside this file, as in the sdist, else
                           ../../native, the repository's)
  GPUMEM_TORCH_BUILD_DIR   CMake's build folder (default: under setuptools' build/ here); never
                           native/build, which the Node addon's build owns
  CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default 2)
  GPUMEM_PORTABLE          ON: the library is linked to load on any x86_64 Linux with glibc 2.28 or
                           later (native/cmake/portable.cmake; the glibc sysroot comes with the
                           repository's `npm ci`), checked by native/scripts/check-glibc.sh, and the
                           wheel is tagged manylinux_2_28_x86_64; a library that fails the check fails
                           the build. AUTO (default): the same where the check passes (the repository,
                           after `npm ci`); elsewhere (a build from the sdist) the wheel is for this
                           machine, tagged linux_<arch>, and says so. OFF: linked for this machine only.
"""

import os
import shutil
import subprocess
from pathlib import Path

import setuptools
from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
# What of native/ the library's build reads (native/CMakeLists.txt, its cmake/ scripts, the headers and
# sources) and the script that checks the portable link: copied into the sdist under native/.
NATIVE_FILES = ("CMakeLists.txt", "cmake", "include", "src", "scripts/check-glibc.sh", "LICENSE")
LIBRARY = "libgpumem_torch.so"
# The platform tag of a library that native/scripts/check-glibc.sh passes: glibc 2.28 or later, no libstdc++.
MANYLINUX_TAG = "manylinux_2_28_x86_64"


def portable_mode() -> str:
    mode = (os.environ.get("GPUMEM_PORTABLE") or "AUTO").strip().upper()
    if mode not in ("AUTO", "ON", "OFF"):
        raise SystemExit(f"gpumem-torch: GPUMEM_PORTABLE must be AUTO, ON or OFF, not {mode!r}")
    return mode


def is_native(path: Path) -> bool:
    return (path / "CMakeLists.txt").is_file() and (path / "src" / "torch").is_dir()


def native_dir() -> Path:
    if os.environ.get("GPUMEM_NATIVE_DIR"):
        candidates = [Path(os.environ["GPUMEM_NATIVE_DIR"])]
    else:  # the sdist's copy, then the repository's folder
        candidates = [HERE / "native", HERE.parent.parent / "native"]
    for path in candidates:
        if is_native(path.resolve()):
            return path.resolve()
    raise SystemExit(
        f"gpumem-torch: {' nor '.join(str(p.resolve()) for p in candidates)} is gpumem's native/ folder (no CMakeLists.txt "
        "or src/torch). Build from the sdist or a checkout of the repository, or set GPUMEM_NATIVE_DIR"
    )


def run(cmd, **kwargs):
    print("gpumem-torch: " + " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)


class BuildWithLibrary(build_py):
    """build_py that first compiles libgpumem_torch.so and puts it in the package (gpumem_torch/lib/)."""

    def run(self):
        # setuptools never empties build/lib: a module removed from the package would stay in the wheel.
        shutil.rmtree(Path(self.build_lib) / "gpumem_torch", ignore_errors=True)
        super().run()
        if shutil.which("cmake") is None:
            raise SystemExit("gpumem-torch: cmake is not on PATH (apt-get install cmake)")
        source = native_dir()
        build = Path(
            os.environ.get("GPUMEM_TORCH_BUILD_DIR") or Path(self.get_finalized_command("build").build_temp) / "cmake"
        ).resolve()
        if build == (source / "build").resolve():
            raise SystemExit(f"gpumem-torch: {build} is the Node addon's build folder; choose another GPUMEM_TORCH_BUILD_DIR")
        build.mkdir(parents=True, exist_ok=True)
        configure = ["cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DGPUMEM_BUILD_TESTS=OFF"]
        arch = os.environ.get("GPUMEM_CUDA_ARCH", "").strip()
        # native/CMakeLists.txt reads GPUMEM_CUDA_ARCH from the environment itself; without it, drop a
        # value cached by an earlier build so that the project's default list applies.
        configure += [f"-DGPUMEM_CUDA_ARCH={arch}"] if arch else ["-UGPUMEM_CUDA_ARCH"]
        mode = portable_mode()
        configure += [f"-DGPUMEM_PORTABLE={mode}"]
        run(configure)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or "2"
        run(["cmake", "--build", build, "--target", "gpumem_torch", "--parallel", jobs])
        built = build / "Release" / LIBRARY
        if not built.is_file():
            cache = (build / "CMakeCache.txt").read_text(errors="replace") if (build / "CMakeCache.txt").exists() else ""
            hint = "" if "CMAKE_CUDA_COMPILER:" in cache and "NOTFOUND" not in cache else " (CMake found no CUDA toolkit: nvcc is needed)"
            raise SystemExit(f"gpumem-torch: the build made no {built}{hint}")
        target = Path(self.build_lib) / "gpumem_torch" / "lib"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target / LIBRARY)
        self.distribution.gpumem_platform_tag = None
        if mode != "OFF":
            # The wheel says manylinux_2_28 only of a library that is: glibc 2.28 or older symbols, libstdc++ linked in.
            check = subprocess.run(["bash", source / "scripts" / "check-glibc.sh", target / LIBRARY], capture_output=True, text=True)
            print(check.stdout.strip(), flush=True)
            if check.returncode != 0 and mode == "AUTO":
                print(
                    f"gpumem-torch: {LIBRARY} is linked for this machine's glibc (no glibc 2.17 sysroot here: "
                    "native/cmake/portable.cmake); the wheel is tagged for this platform, not manylinux_2_28",
                    flush=True,
                )
                return
            if check.returncode != 0:
                raise SystemExit(
                    f"gpumem-torch: {LIBRARY} would not load on every glibc 2.28 system (native/scripts/check-glibc.sh):\n"
                    f"{check.stdout}{check.stderr}Run `npm ci` in the repository (it installs the glibc sysroot that "
                    "native/cmake/portable.cmake links against), or set GPUMEM_PORTABLE=OFF for a wheel for this machine only"
                )
            self.distribution.gpumem_platform_tag = MANYLINUX_TAG


class SdistWithNative(sdist):
    """The sdist carries what of native/ the library's build needs (NATIVE_FILES), under native/ beside
    setup.py, so that a wheel builds from the sdist alone."""

    def make_distribution(self):
        # PEP 625: the archive and its folder are named by the normalized name (gpumem_torch-X.tar.gz), as
        # PyPI requires; setuptools before 69.3 names them gpumem-torch-X.
        name = self.distribution.get_name().replace("-", "_")
        fullname = self.distribution.get_fullname
        self.distribution.get_fullname = lambda: f"{name}-{self.distribution.get_version()}"
        try:
            super().make_distribution()
        finally:
            self.distribution.get_fullname = fullname

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        source = native_dir()
        for name in NATIVE_FILES:
            origin, copy = source / name, Path(base_dir) / "native" / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            if origin.is_dir():
                shutil.copytree(origin, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(origin, copy)


def license_metadata():
    """The licence as an SPDX expression: License-Expression (PEP 639) where setuptools writes it (77 and
    later); older setuptools (Debian 12's 66) writes the same identifier in the License field."""
    version = tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit())
    if version >= (77, 0):
        return {"license_expression": "Apache-2.0", "license_files": ["LICENSE"]}
    return {"license": "Apache-2.0", "license_files": ["LICENSE"]}


class BinaryDistribution(Distribution):
    """The wheel carries a shared library: a platform wheel, not a pure one."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildWithLibrary, "sdist": SdistWithNative}
try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        """py3-none-manylinux_2_28_x86_64: the library does not link against libpython, so one wheel
        serves every Python that Requires-Python admits, and it needs glibc 2.28 or later and no
        libstdc++ (build_py checked it). Without the portable link (GPUMEM_PORTABLE=OFF, or AUTO
        outside the repository): py3-none-linux_<arch>, for the building machine."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", getattr(self.distribution, "gpumem_platform_tag", None) or plat

    cmdclass["bdist_wheel"] = PlatformWheel
except ImportError:  # no `wheel`: setuptools cannot make wheels at all; pip says so
    pass

setup(
    cmdclass=cmdclass,
    distclass=BinaryDistribution,
    package_data={"gpumem_torch": ["lib/*.so", "py.typed"]},
    **license_metadata(),
)
