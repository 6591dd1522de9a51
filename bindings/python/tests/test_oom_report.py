"""The out-of-memory report (gpumem_torch.last_oom_report, docs/torch.md "Is this OOM real?")
(npm run test:torch).

- OomReportParsingTests need nothing: the JSON's keys become snake_case.
- OomReportLibraryTests need only the built library (no PyTorch, no GPU): allocations and frees on
  the host twin (device -1) go through the event ring, and a failed one leaves a report.
- OomReportTorchTests need PyTorch with a CUDA device; otherwise they are skipped with the reason.
  Under enable("pool") with a 1 GiB cap, a 400 MiB tensor freed and a 20 MiB one carved from its
  segment make a 700 MiB request fail: fragmentation, which expandable would have served.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)

import gpumem_torch  # noqa: E402
from gpumem_torch._oom import parse_oom_report  # noqa: E402
from support import clean_env, run_code, skip_reasons  # noqa: E402

LIB_REASON, TORCH_REASON = skip_reasons("test_oom_report", "PyTorch tests")


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (the library's configuration and its last report are per
    process); returns the JSON of its last line."""
    return run_code(code, clean_env(**env), [BINDINGS, HERE])


# Loads the library directly, makes an allocator instance from SPEC on the host twin (device -1,
# GPUMEM_OOM=null: a failure is NULL and the message), allocates ten blocks of 1 MiB, frees five and
# asks for 1 TiB (more than the twin's 64 GiB range).
HOST_OOM = """
import ctypes, json, os
import gpumem_torch
from gpumem_torch import _library
lib = _library.load()
lib.gpumem_malloc_1.restype = ctypes.c_void_p
lib.gpumem_malloc_1.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
lib.gpumem_free_1.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
out = {"before": gpumem_torch.last_oom_report()}
out["instance"] = lib.gpumem_instance_create(SPEC.encode())
blocks = [lib.gpumem_malloc_1(1 << 20, -1, None) for _ in range(10)]
for p in blocks[::2]:
    lib.gpumem_free_1(p, 1 << 20, -1, None)
out["big"] = lib.gpumem_malloc_1(1 << 40, -1, None)
out["message"] = gpumem_torch.last_error()
out["report"] = gpumem_torch.last_oom_report()
print(json.dumps(out))
"""


class OomReportParsingTests(unittest.TestCase):
    def test_keys_become_snake_case(self):
        r = parse_oom_report(
            '{"strategy":"pool","requestBytes":2,"largestFreeBlock":null,"capacityBytes":64,"verdict":"fragmentation",'
            '"skipReason":null,"strategies":[{"strategy":"expandable","fits":true,"peakReservedBytes":60,"requestFits":true}],'
            '"notReplayed":["async: why"]}'
        )
        self.assertEqual(r["request_bytes"], 2)
        self.assertIsNone(r["largest_free_block"])
        self.assertEqual(r["verdict"], "fragmentation")
        self.assertEqual(r["strategies"], [{"strategy": "expandable", "fits": True, "peak_reserved_bytes": 60, "request_fits": True}])
        self.assertEqual(r["not_replayed"], ["async: why"])

    def test_not_an_object(self):
        with self.assertRaisesRegex(ValueError, "expected an out-of-memory report as a JSON object"):
            parse_oom_report("[1, 2]")


@unittest.skipUnless(LIB_REASON is None, LIB_REASON or "")
class OomReportLibraryTests(unittest.TestCase):
    def test_a_failure_on_the_host_twin_leaves_a_report(self):
        r = run_python(f"SPEC = {'GPUMEM_ALLOCATOR=expandable' + chr(10) + 'GPUMEM_OOM=null'!r}\n" + HOST_OOM)
        self.assertIsNone(r["before"])
        self.assertEqual(r["instance"], 1)
        self.assertIsNone(r["big"])
        message = r["message"]
        self.assertTrue(message.startswith("CUDA out of memory. gpumem: expandable could not allocate 1.00 TiB"), message)
        report = r["report"]
        self.assertEqual(report["strategy"], "expandable")
        self.assertEqual(report["instance"], 1)
        self.assertEqual(report["device"], -1)
        self.assertEqual(report["request_bytes"], 1 << 40)
        self.assertEqual(report["live_bytes"], 5 << 20)
        self.assertEqual(report["recorded_events"], 15)  # ten allocations, five frees
        self.assertEqual(report["window"], 65536)
        self.assertEqual(report["time_bound_ms"], 250)
        # Host memory has no capacity unless one is configured: no verdict, no replay, and it says why.
        self.assertEqual(report["verdict"], "unknown")
        self.assertIsNone(report["capacity_bytes"])
        self.assertFalse(report["replayed"])
        self.assertEqual(report["skip_reason"], "the capacity is not known")
        self.assertTrue(message.endswith(report["text"]), (message, report["text"]))

    def test_the_ring_off(self):
        spec = "GPUMEM_ALLOCATOR=expandable\nGPUMEM_OOM=null\nGPUMEM_OOM_WINDOW=0\nGPUMEM_OOM_REPLAY_MS=10"
        r = run_python(f"SPEC = {spec!r}\n" + HOST_OOM)
        report = r["report"]
        self.assertEqual(report["recorded_events"], 0)
        self.assertEqual(report["window"], 0)
        self.assertEqual(report["time_bound_ms"], 10)
        self.assertEqual(report["skip_reason"], "the event ring is off (GPUMEM_OOM_WINDOW=0)")
        self.assertIn("No replay: the event ring is off (GPUMEM_OOM_WINDOW=0).", r["message"])

    def test_bad_values_are_named(self):
        for keywords, expected in (
            ({"oom_window": "64KiB"}, "GPUMEM_OOM_WINDOW='64KiB' is not valid: expected a number of events from 0 (off) to 1048576"),
            ({"oom_replay_ms": -1}, "GPUMEM_OOM_REPLAY_MS='-1' is not valid: expected milliseconds from 0 (no replay) to 60000"),
        ):
            with self.subTest(keywords=keywords):
                with self.assertRaises(ValueError) as caught:
                    gpumem_torch.describe("pool", **keywords)
                self.assertIn(expected, str(caught.exception))

    def test_keywords(self):
        self.assertEqual(
            gpumem_torch.describe("pool", oom_window=0, oom_replay_ms=100),
            "strategy=pool pool.upstream=cuda pool.max_reserved=none oom=raise",
        )


# Under enable("pool") capped at 1 GiB: fragmentation first, then a real shortage; under
# GPUMEM_OOM_WINDOW=0 the verdict without the replay.
TORCH_OOM = """
import json
import gpumem_torch
gpumem_torch.enable("pool", pool_max_reserved="1GiB", **KEYWORDS)
import torch
MiB = 1 << 20
def attempt(size):
    try:
        torch.empty(size, dtype=torch.uint8, device="cuda")
        return None
    except Exception as e:
        return str(e)
out = {}
a = torch.empty(400 * MiB, dtype=torch.uint8, device="cuda")
del a
b = torch.empty(20 * MiB, dtype=torch.uint8, device="cuda")
out["fragmented"] = attempt(700 * MiB)
out["fragmented_report"] = gpumem_torch.last_oom_report()
del b
c = torch.empty(900 * MiB, dtype=torch.uint8, device="cuda")
out["real"] = attempt(200 * MiB)
out["real_report"] = gpumem_torch.last_oom_report()
print(json.dumps(out))
"""


@unittest.skipUnless(TORCH_REASON is None, TORCH_REASON or "")
class OomReportTorchTests(unittest.TestCase):
    def test_fragmentation_then_real_under_enable(self):
        r = run_python("KEYWORDS = {}\n" + TORCH_OOM)
        message = r["fragmented"]
        self.assertIsNotNone(message, "the 700 MiB request should fail under pool capped at 1 GiB")
        self.assertTrue(message.startswith("CUDA out of memory. gpumem: pool could not allocate 700.00 MiB"), message)
        report = r["fragmented_report"]
        self.assertEqual(report["verdict"], "fragmentation", report)
        self.assertEqual(report["capacity_bytes"], 1 << 30)
        self.assertEqual(report["capacity_source"], "the configured limit")
        self.assertTrue(report["replayed"], report)
        self.assertLessEqual(report["replay_ms"], report["time_bound_ms"] + 50)
        fits = {s["strategy"]: s["fits"] for s in report["strategies"]}
        # Every strategy with an address-only twin, in the registry's order: 'caching' (PyTorch's
        # allocator) cannot release the segment the 20 MiB tensor holds, as the pool cannot.
        self.assertEqual(fits, {"pool": False, "expandable": True, "caching": False}, report)
        self.assertIn("Fragmentation:", message)
        self.assertIn("expandable would have fit", message)
        self.assertIn("Try GPUMEM_ALLOCATOR=expandable.", message)

        message = r["real"]
        self.assertIsNotNone(message, "the 200 MiB request should fail beside 900 MiB live under a 1 GiB cap")
        self.assertTrue(message.startswith("CUDA out of memory."), message)
        self.assertIn("Real: the live bytes (900.00 MiB) and the request (200.00 MiB) exceed the capacity", message)
        self.assertEqual(r["real_report"]["verdict"], "real")
        self.assertFalse(r["real_report"]["replayed"])

    def test_the_ring_off_keeps_the_verdict(self):
        r = run_python("KEYWORDS = {'oom_window': 0}\n" + TORCH_OOM)
        report = r["fragmented_report"]
        self.assertEqual(report["verdict"], "fragmentation")
        self.assertFalse(report["replayed"])
        self.assertEqual(report["skip_reason"], "the event ring is off (GPUMEM_OOM_WINDOW=0)")
        self.assertIn("No replay: the event ring is off (GPUMEM_OOM_WINDOW=0).", r["fragmented"])


if __name__ == "__main__":
    unittest.main()
