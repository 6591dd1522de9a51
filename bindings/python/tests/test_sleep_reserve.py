"""gpumem_torch.reserve_backup and GPUMEM_SLEEP_RESERVE (npm run test:torch).

- ArgumentTests need nothing built: the byte count is checked before the library is loaded.
- HostReserveTests need the built library: 'expandable' on the host twin (device -1), each case in a
  process of its own (the configuration is per process).
- GpuReserveTests need PyTorch with a CUDA device (skipped with the reason otherwise): a first sleep
  after GPUMEM_SLEEP_RESERVE, and one without, keep the content and report where their time went.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)

import gpumem_torch  # noqa: E402
from support import clean_env, run_code, skip_reasons  # noqa: E402

LIB_REASON, TORCH_REASON = skip_reasons("test_sleep_reserve", "GPU tests")

MiB = 1 << 20
CHUNK = 128 * MiB  # the engine's pinning chunk (sleep_engine::pin_chunk_bytes)

_PRELUDE = """
import ctypes, json, time, gpumem_torch
from gpumem_torch import _library
lib = _library.load()
lib.gpumem_malloc.restype = ctypes.c_void_p
lib.gpumem_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
HOST = -1
def wait_pool(n):
    while gpumem_torch.backup_pool_bytes(HOST) < n:
        time.sleep(0.001)
"""


def run_python(code, **env):
    return run_code(_PRELUDE + code, clean_env(**{"GPUMEM_OOM": "null", "PYTHONUNBUFFERED": "1", **env}), [BINDINGS])


class ArgumentTests(unittest.TestCase):
    def test_the_byte_count_is_checked_before_anything_runs(self):
        for bad in (True, 1.5, "1GiB", None, [1]):
            with self.subTest(bad=bad), self.assertRaisesRegex(TypeError, "byte count"):
                gpumem_torch.reserve_backup(bad)
        for bad in (-1, 2**64):
            with self.subTest(bad=bad), self.assertRaisesRegex(ValueError, "from 0 to 2\\*\\*64 - 1"):
                gpumem_torch.reserve_backup(bad)


@unittest.skipUnless(LIB_REASON is None, LIB_REASON or "")
class HostReserveTests(unittest.TestCase):
    def test_reserve_backup_fills_the_pool_and_the_first_sleep_takes_it(self):
        r = run_python(
            "with gpumem_torch.region('weights'):\n"
            "    lib.gpumem_malloc(3 * (1 << 20), HOST, None)\n"
            "gpumem_torch.reserve_backup(5 * (1 << 20), device=HOST)\n"
            "wait_pool(1)\n"
            "out = {'pool': gpumem_torch.backup_pool_bytes(HOST)}\n"
            "out['sleep'] = gpumem_torch.sleep('weights', device=HOST)\n"
            "gpumem_torch.wake(device=HOST)\n"
            "print(json.dumps(out))\n"
        )
        self.assertEqual(r["pool"], CHUNK)  # rounded up to whole chunks
        timing = r["sleep"]["timing"]
        self.assertEqual(timing["pooled_bytes"], CHUNK)
        self.assertEqual(timing["pinned_bytes"], 0)
        self.assertEqual(r["sleep"]["copied_bytes"], 3 * MiB)

    def test_gpumem_sleep_reserve_pins_from_the_first_allocation(self):
        r = run_python(
            "with gpumem_torch.region('weights'):\n"
            "    lib.gpumem_malloc(1 << 20, HOST, None)\n"
            "wait_pool(1)\n"
            "print(json.dumps({'pool': gpumem_torch.backup_pool_bytes(HOST)}))\n",
            GPUMEM_SLEEP_RESERVE="200MiB",
        )
        self.assertEqual(r["pool"], 2 * CHUNK)

    def test_past_the_limit_it_is_out_of_memory(self):
        r = run_python(
            "lib.gpumem_malloc(1 << 20, HOST, None)\n"
            "try:\n"
            "    gpumem_torch.reserve_backup(1 << 62, device=HOST)\n"
            "    out = None\n"
            "except gpumem_torch.OutOfMemoryError as e:\n"
            "    out = str(e)\n"
            "print(json.dumps({'error': out}))\n"
        )
        self.assertIsNotNone(r["error"])
        self.assertIn("host memory", r["error"])


_GPU = """
import json, time, gpumem_torch
gpumem_torch.enable()
import torch
with gpumem_torch.region('weights'):
    ts = [torch.randint(0, 255, (n,), dtype=torch.uint8, device='cuda') for n in (1 << 20, 300 << 20, 37 << 20)]
total = sum(t.numel() for t in ts)
if RESERVED:
    while gpumem_torch.backup_pool_bytes() < total:
        time.sleep(0.01)
sums = [int(t.sum()) for t in ts]
out = {'sleep': gpumem_torch.sleep('weights')}
gpumem_torch.wake('weights')
out['same'] = [int(t.sum()) for t in ts] == sums
out['total'] = total
print(json.dumps(out))
"""


@unittest.skipIf(TORCH_REASON, TORCH_REASON or "")
class GpuReserveTests(unittest.TestCase):
    def first_sleep(self, reserved):
        env = {"GPUMEM_SLEEP_RESERVE": "512MiB"} if reserved else {}
        r = run_code(f"RESERVED = {reserved}\n" + _GPU, clean_env(PYTHONUNBUFFERED="1", **env), [BINDINGS])
        self.assertTrue(r["same"])
        self.assertEqual(r["sleep"]["copied_bytes"], r["total"])
        return r["sleep"]["timing"]

    def test_a_reservation_pins_nothing_in_the_first_sleep(self):
        timing = self.first_sleep(True)
        self.assertGreaterEqual(timing["pooled_bytes"], 338 * MiB)
        self.assertEqual(timing["pinned_bytes"], 0)
        self.assertEqual(timing["backup_wait_seconds"], 0)

    def test_without_one_the_first_sleep_pins_while_it_copies(self):
        timing = self.first_sleep(False)
        self.assertEqual(timing["pooled_bytes"], 0)
        self.assertGreaterEqual(timing["pinned_bytes"], 338 * MiB)
        self.assertGreater(timing["register_seconds"], 0)


if __name__ == "__main__":
    unittest.main()
