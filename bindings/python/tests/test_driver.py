"""libgpumem_torch.so on the CUDA driver alone (npm run test:torch), on any machine:

- it links no CUDA runtime (nm, ldd): it opens libcuda.so.1 itself;
- without a driver it loads, says why, and refuses nothing by driver version;
- under native/tests/driver/fake_cuda.c (GPUMEM_CUDA_DRIVER) over a stand-in driver with no device
  (mock_libcuda.c), each reported CUDA version refuses by name exactly the strategies that need a
  newer one, through gpumem_init (enable()) and gpumem_instance_create (allocator()).

Each case runs in a fresh interpreter: the library opens the driver once per process. The same
versions on a real GPU: test_driver_gpu.py."""

import os
import re
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)

import driver_libs  # noqa: E402
import gpumem_torch  # noqa: E402
from support import clean_env, library_reason, run_code  # noqa: E402

LIB_REASON = library_reason()
BUILD_REASON = LIB_REASON or driver_libs.compiler_reason()

_PRELUDE = """
import ctypes, json, os
from gpumem_torch import _driver, _library
lib = _library.load()
def init(strategy):
    os.environ["GPUMEM_ALLOCATOR"] = strategy
    rc = lib.gpumem_init()
    return [rc, _library.last_error()]
def typed(message):
    e = _driver.unsupported(message)
    return [type(e).__name__, isinstance(e, RuntimeError), e.strategy, e.needs, e.required_version, e.driver_version]
"""


def run_python(code, **env):
    return run_code(_PRELUDE + code, clean_env(**env), [BINDINGS])


def fake_driver_env(version):
    return {
        "GPUMEM_CUDA_DRIVER": driver_libs.build("fake_cuda"),
        "GPUMEM_FAKE_DRIVER_REAL": driver_libs.build("mock_libcuda"),
        "GPUMEM_FAKE_DRIVER_VERSION": str(version),
    }


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class NoRuntimeTests(unittest.TestCase):
    def test_no_cuda_runtime_symbols(self):
        if shutil.which("nm") is None:
            self.skipTest("no nm on PATH")
        path = gpumem_torch.library_path()
        names = []
        for args in (["nm", path], ["nm", "-D", path]):
            out = subprocess.run(args, capture_output=True, text=True).stdout
            names += [line.split()[-1] for line in out.splitlines() if line.strip()]
        self.assertGreater(len(names), 100, "nm listed too little to judge")
        # cudart's C functions (cudaMalloc, __cudaRegisterFatBinary, ...) or its C++ internals
        # (cudart::...): the static runtime linked back in. Mangled names, so that a parameter of a
        # header type (cudaMemLocation) is not taken for one.
        runtime = sorted({n for n in names if re.match(r"_*cuda[A-Z]", n) or "cudart" in n.lower()})
        self.assertEqual(runtime, [], f"libgpumem_torch.so holds CUDA runtime symbols: {runtime[:20]}")
        symbols = "\n".join(names)
        self.assertIn("gpumem_driver_json", symbols)

    def test_no_libcudart_dependency(self):
        if shutil.which("ldd") is None:
            self.skipTest("no ldd on PATH")
        out = subprocess.run(["ldd", gpumem_torch.library_path()], capture_output=True, text=True).stdout
        self.assertNotIn("libcudart", out)
        self.assertNotIn("libcuda.so", out)  # opened at run time, never linked


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class NoDriverTests(unittest.TestCase):
    def test_a_missing_driver_is_a_reason_not_a_crash(self):
        r = run_python(
            "print(json.dumps([_driver.driver_info(), init('tiered')]))",
            GPUMEM_CUDA_DRIVER="/nonexistent/libcuda.so.1",
        )
        info, (rc, error) = r
        self.assertFalse(info["loaded"])
        self.assertEqual(info["version"], 0)
        self.assertEqual(info["path"], "/nonexistent/libcuda.so.1")
        self.assertIn("no CUDA driver: /nonexistent/libcuda.so.1 could not be opened", info["failure"])
        # Nothing refused by version without a driver: the first allocation says there is no device.
        self.assertEqual(rc, 0, error)
        self.assertTrue(all(v is None for v in info["refused"].values()))

    def test_every_strategy_states_its_driver_needs(self):
        info = run_python("print(json.dumps(_driver.driver_info()))", GPUMEM_CUDA_DRIVER="/nonexistent/libcuda.so.1")
        for name in ["cuda", "uvm", "pool", "async", "expandable", "pinned", "tiered"]:
            self.assertTrue(info["needs"][name], f"{name} lists no driver needs")
            for need in info["needs"][name]:
                self.assertRegex(need["what"], r"\S")
                self.assertGreaterEqual(need["version"], 2000)
        self.assertEqual(info["needs"]["host"], [])
        self.assertIn({"what": "host-located cuMemCreate (CU_MEM_LOCATION_TYPE_HOST_NUMA)", "version": 12020}, info["needs"]["tiered"])


@unittest.skipIf(BUILD_REASON, BUILD_REASON or "")
class FakeDriverTests(unittest.TestCase):
    """The interposer over the stand-in driver: the versions the GPU test runs on a device."""

    def info(self, version):
        return run_python("print(json.dumps(_driver.driver_info()))", **fake_driver_env(version))

    def test_cuda_12_0_refuses_tiered_by_name_and_nothing_else(self):
        info = self.info(12000)
        self.assertTrue(info["loaded"], info["failure"])
        self.assertEqual(info["version"], 12000)
        refused = {k: v for k, v in info["refused"].items() if v is not None}
        self.assertEqual(refused, {"tiered": {"what": "host-located cuMemCreate (CU_MEM_LOCATION_TYPE_HOST_NUMA)", "version": 12020}})

    def test_newer_drivers_refuse_nothing(self):
        for version in (12020, 12040, 12080):
            with self.subTest(version=version):
                info = self.info(version)
                self.assertEqual(info["version"], version)
                self.assertEqual({k: v for k, v in info["refused"].items() if v is not None}, {})

    def test_enable_path_raises_the_typed_error(self):
        r = run_python(
            "rc, error = init('tiered')\nprint(json.dumps([rc, error, typed(error)]))",
            **fake_driver_env(12000),
        )
        rc, error, typed = r
        self.assertEqual(rc, 7)  # GPUMEM_TORCH_ERR_DRIVER
        self.assertEqual(
            error,
            "gpumem: strategy 'tiered' needs host-located cuMemCreate (CU_MEM_LOCATION_TYPE_HOST_NUMA), which came "
            "with CUDA 12.2 (driver R535 or later), but the NVIDIA driver supports CUDA 12.0: update the driver or "
            "choose another strategy",
        )
        self.assertEqual(typed, ["DriverUnsupportedError", True, "tiered", "host-located cuMemCreate (CU_MEM_LOCATION_TYPE_HOST_NUMA)", 12020, 12000])

    def test_a_refused_strategy_keeps_nothing_and_another_is_taken(self):
        r = run_python(
            "first = init('tiered')\nsecond = init('expandable')\n"
            "print(json.dumps([first[0], second, lib.gpumem_config().decode()]))",
            **fake_driver_env(12000),
        )
        first_rc, (second_rc, second_error), config = r
        self.assertEqual(first_rc, 7)
        self.assertEqual(second_rc, 0, second_error)
        self.assertIn("expandable", config)

    def test_instances_are_refused_the_same_way(self):
        r = run_python(
            "lib.gpumem_instance_create.restype = ctypes.c_int\n"
            "rc = lib.gpumem_instance_create(b'GPUMEM_ALLOCATOR=tiered\\n')\n"
            "ok = lib.gpumem_instance_create(b'GPUMEM_ALLOCATOR=pool\\n')\n"
            "print(json.dumps([rc, _library.last_error(), ok]))",
            **fake_driver_env(12000),
        )
        rc, _, ok = r
        self.assertEqual(rc, -7)
        self.assertGreater(ok, 0)

    def test_the_interposer_hides_newer_entry_points(self):
        # At 12.0 the location forms of cuMemAdvise/cuMemPrefetchAsync (12.2) are not handed out:
        # gpumem's table notes them missing and uses the device-ordinal forms.
        code = (
            "lib.gpumem_driver_json.restype = ctypes.c_char_p\n"
            "fake = ctypes.CDLL(os.environ['GPUMEM_CUDA_DRIVER'])\n"
            "def find(name, version):\n"
            "    p = ctypes.c_void_p(); status = ctypes.c_int(-1)\n"
            "    rc = fake.cuGetProcAddress_v2(name.encode(), ctypes.byref(p), version, ctypes.c_uint64(1), ctypes.byref(status))\n"
            "    return [rc, status.value, bool(p.value)]\n"
            "v = ctypes.c_int(0); fake.cuDriverGetVersion(ctypes.byref(v))\n"
            "print(json.dumps([v.value, find('cuMemCreate', 12000), find('cuGraphInstantiateWithFlags', 12000), find('cuMemCreate', 10010)]))"
        )
        version, create, instantiate, too_old = run_python(code, **fake_driver_env(12000))
        self.assertEqual(version, 12000)
        self.assertEqual(create, [0, 0, True])
        self.assertEqual(instantiate, [0, 0, True])
        self.assertEqual(too_old[0], 500)  # CUDA_ERROR_NOT_FOUND: cuMemCreate is CUDA 10.2's
        self.assertFalse(too_old[2])


if __name__ == "__main__":
    unittest.main()
