"""Builds the gpumem-torch wheel: the gpumem_torch package plus libgpumem_torch.so, compiled by
CMake from the repository's native/ folder (target gpumem_torch only; no Node.js, no PyTorch).

    pip wheel --no-deps --no-build-isolation bindings/python      # from the repository root

Environment:
  GPUMEM_CUDA_ARCH         CUDA architectures, e.g. "90" or "80;90" (default: native/CMakeLists.txt's)
  GPUMEM_NATIVE_DIR        the native/ folder (default: ../../native from this file)
  GPUMEM_TORCH_BUILD_DIR   CMake's build folder (default: under setuptools' build/ here); never
                           native/build, which the Node addon's build owns
  CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default 2)
  GPUMEM_PORTABLE          AUTO (default) or ON: the library is linked to load on any x86_64 Linux with
                           glibc 2.28 or later (native/cmake/portable.cmake; the glibc sysroot comes with
                           the repository's `npm ci`), checked by native/scripts/check-glibc.sh, and the
                           wheel is tagged manylinux_2_28_x86_64; a library that fails the check fails
                           the build. OFF: linked for this machine only, tagged linux_<arch>.
"""

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
LIBRARY = "libgpumem_torch.so"
# The platform tag of a library that native/scripts/check-glibc.sh passes: glibc 2.28 or later, no libstdc++.
MANYLINUX_TAG = "manylinux_2_28_x86_64"


def portable_mode() -> str:
    mode = (os.environ.get("GPUMEM_PORTABLE") or "AUTO").strip().upper()
    if mode not in ("AUTO", "ON", "OFF"):
        raise SystemExit(f"gpumem-torch: GPUMEM_PORTABLE must be AUTO, ON or OFF, not {mode!r}")
    return mode


def native_dir() -> Path:
    path = Path(os.environ.get("GPUMEM_NATIVE_DIR") or HERE.parent.parent / "native").resolve()
    if not (path / "CMakeLists.txt").is_file() or not (path / "src" / "torch").is_dir():
        raise SystemExit(
            f"gpumem-torch: {path} is not gpumem's native/ folder (no CMakeLists.txt or src/torch). "
            "Build from a checkout of the repository, or set GPUMEM_NATIVE_DIR"
        )
    return path


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
            if check.returncode != 0:
                raise SystemExit(
                    f"gpumem-torch: {LIBRARY} would not load on every glibc 2.28 system (native/scripts/check-glibc.sh):\n"
                    f"{check.stdout}{check.stderr}Run `npm ci` in the repository (it installs the glibc sysroot that "
                    "native/cmake/portable.cmake links against), or set GPUMEM_PORTABLE=OFF for a wheel for this machine only"
                )
            self.distribution.gpumem_platform_tag = MANYLINUX_TAG


class BinaryDistribution(Distribution):
    """The wheel carries a shared library: a platform wheel, not a pure one."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildWithLibrary}
try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        """py3-none-manylinux_2_28_x86_64: the library does not link against libpython, so one wheel
        serves every Python 3, and it needs glibc 2.28 or later and no libstdc++ (build_py checked
        it). With GPUMEM_PORTABLE=OFF: py3-none-linux_<arch>, for the building machine."""

        def get_tag(self):
            _, _, plat = super().get_tag()
            return "py3", "none", getattr(self.distribution, "gpumem_platform_tag", None) or plat

    cmdclass["bdist_wheel"] = PlatformWheel
except ImportError:  # no `wheel`: setuptools cannot make wheels at all; pip says so
    pass

setup(cmdclass=cmdclass, distclass=BinaryDistribution, package_data={"gpumem_torch": ["lib/*.so", "py.typed"]})
