"""The package behaves as PyTorch users expect of it (npm run test:torch; the built library, no
PyTorch, no GPU):

- torch's names: reset_peak_memory_stats (reset_peak_stats its older alias), and memory_stats keys
  that are torch.cuda.memory_stats' names, only for figures the library keeps;
- the library's warnings reach Python's warnings module (stderr where no Python handler is set);
- a value holding a NUL character is refused, naming the keyword, not read cut short;
- a decimal-looking size unit ('4GB') is refused, the message suggesting the binary one.
"""

import ctypes
import json
import os
import subprocess
import sys
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)

import gpumem_torch  # noqa: E402

LIB = gpumem_torch.library_path()
HAVE_LIB = os.path.exists(LIB)
LIB_REASON = f"libgpumem_torch.so not found at {LIB} (build native/ with CUDA or set GPUMEM_TORCH_LIB)"
SLAB_LIB = os.path.join(os.path.dirname(LIB), "libgpumem_example_slab.so")

# torch.cuda.memory_stats' keys (torch/cuda/memory.py, memory_stats' docstring), with the pool
# (all, large_pool, small_pool) and the statistic (current, peak, allocated, freed) spelled out.
_TORCH_POOLS = ("all", "large_pool", "small_pool")
_TORCH_STATS = ("current", "peak", "allocated", "freed")
TORCH_KEYS = {
    f"{name}.{pool}.{stat}"
    for name in (
        "allocation",
        "segment",
        "active",
        "inactive_split",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "inactive_split_bytes",
        "requested_bytes",
        "oversize_allocations",
        "oversize_segments",
    )
    for pool in _TORCH_POOLS
    for stat in _TORCH_STATS
} | {"num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free", "max_split_size"}

# The torch keys gpumem_torch.memory_stats gives (segment.all.current: not for async).
GPUMEM_TORCH_KEYS = {
    "allocated_bytes.all.current",
    "allocated_bytes.all.peak",
    "reserved_bytes.all.current",
    "reserved_bytes.all.peak",
    "allocation.all.current",
    "allocation.all.allocated",
    "allocation.all.freed",
    "segment.all.current",
    "num_device_alloc",
    "num_device_free",
    "num_ooms",
}


def _env(**overrides):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    env["GPUMEM_TORCH_LIB"] = LIB
    env.update(overrides)
    return env


def run_python(code, *flags, **env):
    """Runs ``code`` in a fresh interpreter with only ``env``'s gpumem settings; (last JSON line, stderr)."""
    prelude = f"import json, sys, warnings; sys.path.insert(0, {BINDINGS!r}); import gpumem_torch\n"
    proc = subprocess.run(
        [sys.executable, *flags, "-c", prelude + code], capture_output=True, text=True, env=_env(**env), timeout=60
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1]), proc.stderr


class TorchNameTests(unittest.TestCase):
    def test_reset_peak_memory_stats_is_torchs_name_and_the_old_one_stays(self):
        self.assertIn("reset_peak_memory_stats", gpumem_torch.__all__)
        self.assertIs(gpumem_torch.reset_peak_stats, gpumem_torch.reset_peak_memory_stats)
        self.assertIs(gpumem_torch.Allocator.reset_peak_stats, gpumem_torch.Allocator.reset_peak_memory_stats)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the alias says nothing
            self.assertIs(getattr(gpumem_torch, "reset_peak_stats"), gpumem_torch.reset_peak_memory_stats)

    @unittest.skipUnless(HAVE_LIB, LIB_REASON)
    def test_reset_peak_memory_stats_calls_the_library(self):
        result, _ = run_python("gpumem_torch.reset_peak_memory_stats(0); print(json.dumps({'ok': gpumem_torch.max_memory_allocated(0)}))")
        self.assertEqual(result, {"ok": 0})

    @unittest.skipUnless(HAVE_LIB, LIB_REASON)
    def test_memory_stats_keys_are_torchs_names_for_known_figures_only(self):
        code = "print(json.dumps({'keys': sorted(gpumem_torch.memory_stats(0))}))"
        for strategy in ("pool", "cuda", "uvm", "expandable", "async"):
            with self.subTest(strategy=strategy):
                result, _ = run_python(code, GPUMEM_ALLOCATOR=strategy)
                keys = set(result["keys"])
                torch_keys = {k for k in keys if not k.startswith("gpumem.")}
                self.assertLessEqual(torch_keys, TORCH_KEYS, "a key torch.cuda.memory_stats does not have")
                expected = GPUMEM_TORCH_KEYS - ({"segment.all.current"} if strategy == "async" else set())
                self.assertEqual(torch_keys, expected)
                # Figures the library does not keep are left out, never filled with another one.
                for absent in ("requested_bytes.all.current", "requested_bytes.all.peak", "active_bytes.all.current",
                               "active.all.current", "inactive_split.all.current", "inactive_split_bytes.all.current",
                               "num_alloc_retries", "num_sync_all_streams", "allocated_bytes.all.allocated"):
                    self.assertNotIn(absent, keys)
                self.assertEqual(sorted(keys), result["keys"])  # sorted by key, as torch's


@unittest.skipUnless(HAVE_LIB, LIB_REASON)
class LibraryWarningTests(unittest.TestCase):
    _RECORD = (
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    {call}\n"
        "print(json.dumps({{'warnings': [[w.category.__name__, str(w.message), w.filename] for w in caught]}}))\n"
    )

    @unittest.skipUnless(os.path.exists(SLAB_LIB), f"the example plug-in is not built ({SLAB_LIB})")
    def test_deprecated_spellings_are_future_warnings_at_the_callers_line(self):
        result, stderr = run_python(
            self._RECORD.format(call="gpumem_torch.check_config()"), GPUMEM_ALLOCATOR="native", GPUMEM_NATIVE_LIBRARY=SLAB_LIB
        )
        self.assertIn(
            ["FutureWarning", "gpumem: GPUMEM_ALLOCATOR=native is deprecated and will be removed; use GPUMEM_ALLOCATOR=plugin", "<string>"],
            result["warnings"],
        )
        self.assertIn(
            ["FutureWarning", "gpumem: GPUMEM_NATIVE_LIBRARY is deprecated and will be removed; use GPUMEM_PLUGIN_LIBRARY", "<string>"],
            result["warnings"],
        )
        self.assertNotIn("deprecated", stderr)  # recorded, so not printed

    @unittest.skipUnless(os.path.exists(SLAB_LIB), f"the example plug-in is not built ({SLAB_LIB})")
    def test_an_error_filter_raises_from_the_call(self):
        code = (
            "try:\n"
            "    gpumem_torch.check_config()\n"
            "    print(json.dumps({'raised': None}))\n"
            "except FutureWarning as e:\n"
            "    print(json.dumps({'raised': str(e)}))\n"
        )
        result, _ = run_python(code, "-W", "error::FutureWarning", GPUMEM_ALLOCATOR="native", GPUMEM_PLUGIN_LIBRARY=SLAB_LIB)
        self.assertEqual(result["raised"], "gpumem: GPUMEM_ALLOCATOR=native is deprecated and will be removed; use GPUMEM_ALLOCATOR=plugin")

    def test_a_trace_that_cannot_start_is_a_runtime_warning(self):
        result, _ = run_python(self._RECORD.format(call="gpumem_torch.is_recording()"), GPUMEM_TRACE="/nonexistent/dir/t.jsonl")
        [(category, message, filename)] = result["warnings"]
        self.assertEqual((category, filename), ("RuntimeWarning", "<string>"))
        self.assertIn("/nonexistent/dir/t.jsonl", message)
        self.assertTrue(message.endswith("(GPUMEM_TRACE); running without an allocation trace"), message)

    @unittest.skipUnless(os.path.exists(SLAB_LIB), f"the example plug-in is not built ({SLAB_LIB})")
    def test_without_a_handler_the_library_writes_to_stderr(self):
        # A C user (here ctypes without the package): the library's own fallback.
        code = f"import ctypes, json; lib = ctypes.CDLL({LIB!r}); print(json.dumps({{'rc': lib.gpumem_init()}}))"
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
            env=_env(GPUMEM_ALLOCATOR="native", GPUMEM_PLUGIN_LIBRARY=SLAB_LIB),
        )
        self.assertEqual(json.loads(proc.stdout), {"rc": 0}, proc.stderr)
        self.assertEqual(
            proc.stderr, "gpumem: GPUMEM_ALLOCATOR=native is deprecated and will be removed; use GPUMEM_ALLOCATOR=plugin\n"
        )

    def test_the_handler_is_taken_back_and_set_again(self):
        lib = ctypes.CDLL(LIB)
        lib.gpumem_set_warning_handler.restype = ctypes.c_void_p
        lib.gpumem_set_warning_handler.argtypes = [ctypes.c_void_p]
        gpumem_torch._library.load()
        current = lib.gpumem_set_warning_handler(None)
        self.assertIsNotNone(current)  # the package's
        self.assertIsNone(lib.gpumem_set_warning_handler(current))


class NulCharacterTests(unittest.TestCase):
    @unittest.skipUnless(HAVE_LIB, LIB_REASON)
    def test_describe_refuses_a_value_with_a_nul(self):
        with self.assertRaises(ValueError) as e:
            gpumem_torch.describe("pool", max_reserved="8GiB\x00junk")
        self.assertEqual(
            str(e.exception),
            "gpumem: max_reserved='8GiB\\x00junk' (GPUMEM_POOL_MAX_RESERVED) is not valid: a value cannot contain a NUL "
            "character (the library would read it cut short there)",
        )
        with self.assertRaisesRegex(ValueError, r"strategy='pool\\x00' \(GPUMEM_ALLOCATOR\)"):
            gpumem_torch.describe("pool\x00")

    def test_check_config_names_the_keyword_and_changes_nothing(self):
        before = dict(os.environ)
        with self.assertRaisesRegex(ValueError, r"pool_max_reserved='8GiB\\x00junk' \(GPUMEM_POOL_MAX_RESERVED\)"):
            gpumem_torch.check_config("pool", pool_max_reserved="8GiB\x00junk")
        self.assertEqual(dict(os.environ), before)


@unittest.skipUnless(HAVE_LIB, LIB_REASON)
class DecimalUnitTests(unittest.TestCase):
    def test_a_decimal_looking_unit_is_refused_with_the_binary_spelling(self):
        with self.assertRaises(ValueError) as e:
            gpumem_torch.describe("pool", max_reserved="4GB")
        self.assertIn("GPUMEM_POOL_MAX_RESERVED='4GB' is not valid", str(e.exception))
        self.assertIn("did you mean '4GiB'? gpumem sizes are binary", str(e.exception))
        self.assertIn("pool.max_reserved=4294967296", gpumem_torch.describe("pool", max_reserved="4GiB"))


if __name__ == "__main__":
    unittest.main()
