"""Allocator objects, torch.cuda.MemPool, tier placement and PyTorch's out-of-memory convention
(npm run test:torch).

- AllocatorConfigTests, PlacementTests, OutOfMemoryMessageTests and RecoveryTests need only the
  built library (no PyTorch, no GPU).
- AllocatorTorchTests need PyTorch with a CUDA device; otherwise they are skipped with the reason.
  Each case runs allocator_worker.py in a process of its own.
"""

import ctypes
import os
import subprocess
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)

import gpumem_torch  # noqa: E402
from oom_predicates import accepted_by_all  # noqa: E402
from support import clean_env, run_code, skip_reasons, torch_cuda_reason, worker_result  # noqa: E402

LIB_REASON, TORCH_REASON = skip_reasons("test_allocator", "PyTorch tests")
HAVE_LIB = LIB_REASON is None

MiB = 1 << 20


def run_python(code, **env):
    """Runs `code` in a fresh interpreter (the library's configuration is per process); returns the
    JSON of its last line."""
    return run_code(code, clean_env(**env), [BINDINGS, HERE])


@unittest.skipUnless(HAVE_LIB, LIB_REASON or "")
class RecoveryTests(unittest.TestCase):
    """A rejected configuration is not kept: the process can still choose a valid one (issue 23, item 22)."""

    def test_check_config_after_a_bad_strategy(self):
        r = run_python(
            "import json, os, gpumem_torch\n"
            "out = {}\n"
            "try:\n"
            "    gpumem_torch.check_config('pol')\n"
            "except ValueError as e:\n"
            "    out['error'] = str(e)\n"
            "out['env_after_error'] = os.environ.get('GPUMEM_ALLOCATOR')\n"
            "out['config'] = gpumem_torch.check_config('pool')\n"
            "try:\n"
            "    gpumem_torch.check_config('uvm')\n"
            "except RuntimeError as e:\n"
            "    out['change'] = str(e)\n"
            "print(json.dumps(out))\n"
        )
        self.assertIn("GPUMEM_ALLOCATOR='pol'", r["error"])
        self.assertIsNone(r["env_after_error"], "the rejected value was left in the environment")
        self.assertEqual(r["config"], "strategy=pool pool.upstream=cuda pool.max_reserved=none oom=raise")
        # A valid configuration, once read, is kept (PyTorch's allocator cannot change once used).
        self.assertIn("already read its configuration", r["change"])

    def test_a_bad_option_is_put_back(self):
        r = run_python(
            "import json, os, gpumem_torch\n"
            "out = {}\n"
            "try:\n"
            "    gpumem_torch.check_config('uvm', uvm_limit='lots')\n"
            "except ValueError as e:\n"
            "    out['error'] = str(e)\n"
            "out['config'] = gpumem_torch.check_config('uvm')\n"
            "print(json.dumps(out))\n",
            GPUMEM_UVM_LIMIT="8GiB",
        )
        self.assertIn("GPUMEM_UVM_LIMIT='lots'", r["error"])
        self.assertEqual(r["config"], f"strategy=uvm uvm.prefetch=1 uvm.advise=none uvm.limit={8 << 30} oom=raise")

    def test_the_library_reads_the_environment_again_after_an_error(self):
        r = run_python(
            "import ctypes, json, os\n"
            "lib = ctypes.CDLL(os.environ['GPUMEM_TORCH_LIB'])\n"
            "lib.gpumem_config.restype = ctypes.c_char_p\n"
            "first = lib.gpumem_init()\n"
            "bad = lib.gpumem_config().decode()\n"
            "os.environ['GPUMEM_ALLOCATOR'] = 'async'\n"
            "second = lib.gpumem_init()\n"
            "print(json.dumps({'first': first, 'bad': bad, 'second': second, 'config': lib.gpumem_config().decode()}))\n",
            GPUMEM_ALLOCATOR="bogus",
        )
        self.assertEqual(r["first"], 1)
        self.assertTrue(r["bad"].startswith("error: gpumem: GPUMEM_ALLOCATOR='bogus'"), r["bad"])
        self.assertEqual(r["second"], 0)
        self.assertEqual(r["config"], "strategy=async async.release_threshold=keep-all oom=raise")


@unittest.skipUnless(HAVE_LIB, LIB_REASON or "")
class AllocatorConfigTests(unittest.TestCase):
    """Allocator configurations are validated by the library without PyTorch, a GPU or the environment."""

    def test_describe_every_strategy(self):
        expected = {
            "cuda": "strategy=cuda oom=raise",
            "uvm": "strategy=uvm uvm.prefetch=1 uvm.advise=none uvm.limit=free oom=raise",
            "pool": "strategy=pool pool.upstream=cuda pool.max_reserved=none oom=raise",
            "async": "strategy=async async.release_threshold=keep-all oom=raise",
            "expandable": "strategy=expandable expandable.unmap_idle_before_growth=0 oom=raise",
            "pinned": "strategy=pinned pool.upstream=pinned pool.max_reserved=none oom=raise",
            "tiered": "strategy=tiered tiered.device_budget=default tiered.host_budget=default tiered.placement=auto oom=raise",
            "caching": "strategy=caching caching.upstream=cuda caching.roundup_power2_divisions=none caching.max_split_size=none "
            "caching.garbage_collection_threshold=0 caching.allowed_memory=none caching.expandable_segments=0 oom=raise",
        }
        # Every strategy of the library's registry that needs no options (the plug-in's needs its library).
        plain = {s["name"] for s in gpumem_torch.strategies() if not s["flags"]["requiresOptions"]}
        self.assertEqual(set(expected), plain)
        for name, text in expected.items():
            with self.subTest(strategy=name):
                self.assertEqual(gpumem_torch.describe(name), text)
        self.assertEqual(
            gpumem_torch.describe("plugin", plugin_library="/opt/lib/slab.so", plugin_options="a=1"),
            "strategy=plugin plugin.library=/opt/lib/slab.so plugin.options=a=1 oom=raise",
        )
        self.assertEqual(gpumem_torch.describe("plugin:/opt/lib/slab.so"), "strategy=plugin plugin.library=/opt/lib/slab.so plugin.options= oom=raise")

    def test_options(self):
        self.assertEqual(
            gpumem_torch.describe("tiered", tiered_device_budget="8GiB", host_budget=1 << 30, placement="host"),
            f"strategy=tiered tiered.device_budget={8 << 30} tiered.host_budget={1 << 30} tiered.placement=host oom=raise",
        )
        self.assertEqual(
            gpumem_torch.describe("uvm", uvm_prefetch=False, uvm_limit="none", oom="null"),
            "strategy=uvm uvm.prefetch=0 uvm.advise=none uvm.limit=none oom=null",
        )

    def test_describe_does_not_read_or_change_the_environment(self):
        r = run_python(
            "import json, os, gpumem_torch\n"
            "d = gpumem_torch.describe('tiered')\n"
            "print(json.dumps({'describe': d, 'env': os.environ.get('GPUMEM_ALLOCATOR'), 'config': gpumem_torch.config()}))\n",
            GPUMEM_ALLOCATOR="cuda",
        )
        self.assertTrue(r["describe"].startswith("strategy=tiered "))
        self.assertEqual(r["env"], "cuda")
        self.assertEqual(r["config"], "strategy=cuda oom=raise")

    def test_bad_input(self):
        with self.assertRaisesRegex(ValueError, "GPUMEM_ALLOCATOR='gpu' is not valid"):
            gpumem_torch.describe("gpu")
        with self.assertRaisesRegex(ValueError, "GPUMEM_TIERED_DEVICE_BUDGET='8G' is not valid"):
            gpumem_torch.describe("tiered", device_budget="8G")
        with self.assertRaisesRegex(ValueError, "GPUMEM_TIERED_PLACEMENT='gpu'"):
            gpumem_torch.describe("tiered", placement="gpu")
        with self.assertRaisesRegex(ValueError, "GPUMEM_ALLOCATOR=plugin needs GPUMEM_PLUGIN_LIBRARY"):
            gpumem_torch.describe("plugin")
        with self.assertRaisesRegex(ValueError, "line break"):
            gpumem_torch.describe("pool", pool_max_reserved="1GiB\nGPUMEM_ALLOCATOR=cuda")
        with self.assertRaisesRegex(TypeError, "unknown option 'budget'"):
            gpumem_torch.describe("tiered", budget="1GiB")
        with self.assertRaisesRegex(TypeError, "strategy name"):
            gpumem_torch.describe(3)
        with self.assertRaisesRegex(TypeError, "of type float"):
            gpumem_torch.describe("pool", pool_max_reserved=1.5)

    def test_instances_through_the_c_interface(self):
        # In a process of its own: instances are never destroyed.
        r = run_python(
            "import ctypes, json, os\n"
            "lib = ctypes.CDLL(os.environ['GPUMEM_TORCH_LIB'])\n"
            "lib.gpumem_last_error.restype = ctypes.c_char_p\n"
            "lib.gpumem_instance_config.restype = ctypes.c_char_p\n"
            "out = {'bad': lib.gpumem_instance_create(b'GPUMEM_ALLOCATOR=gpu\\n'), 'bad_error': lib.gpumem_last_error().decode()}\n"
            "lib.gpumem_instance_create(b'FOO=1\\n'); out['unknown_error'] = lib.gpumem_last_error().decode()\n"
            "out['made'] = [lib.gpumem_instance_create(b'GPUMEM_ALLOCATOR=tiered\\nGPUMEM_TIERED_PLACEMENT=host\\n') for _ in range(7)]\n"
            "out['full'] = lib.gpumem_instance_create(b'GPUMEM_ALLOCATOR=pool\\n'); out['full_error'] = lib.gpumem_last_error().decode()\n"
            "out['config1'] = lib.gpumem_instance_config(1).decode()\n"
            "out['config0'] = lib.gpumem_instance_config(0).decode()\n"
            "out['config9'] = lib.gpumem_instance_config(9).decode()\n"
            "out['symbols'] = all(hasattr(lib, f'gpumem_{kind}_{n}') for n in range(8) for kind in ('malloc', 'mempool_malloc', 'free'))\n"
            "print(json.dumps(out))\n"
        )
        self.assertEqual(r["bad"], -1)
        self.assertIn("GPUMEM_ALLOCATOR='gpu'", r["bad_error"])
        self.assertIn("'FOO=1' names no setting", r["unknown_error"])
        self.assertEqual(r["made"], [1, 2, 3, 4, 5, 6, 7])
        self.assertEqual(r["full"], -4)
        self.assertIn("at most 7 allocator instances", r["full_error"])
        self.assertEqual(r["config1"], "strategy=tiered tiered.device_budget=default tiered.host_budget=default tiered.placement=host oom=raise")
        self.assertEqual(r["config0"], "strategy=expandable expandable.unmap_idle_before_growth=0 oom=raise")
        self.assertIn("out of range", r["config9"])
        self.assertTrue(r["symbols"])

    def test_mempool_entry_point_returns_null_instead_of_throwing(self):
        # The MemPool entry point never throws, whatever GPUMEM_OOM says: a failure is NULL and the
        # reason. On a machine without a GPU every allocation fails (a C++ exception here would
        # abort the process: ctypes cannot catch it).
        r = run_python(
            "import ctypes, json, os\n"
            "lib = ctypes.CDLL(os.environ['GPUMEM_TORCH_LIB'])\n"
            "lib.gpumem_last_error.restype = ctypes.c_char_p\n"
            "lib.gpumem_mempool_malloc_1.restype = ctypes.c_void_p\n"
            "lib.gpumem_mempool_malloc_1.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]\n"
            "n = lib.gpumem_instance_create(b'GPUMEM_ALLOCATOR=pool\\nGPUMEM_OOM=raise\\n')\n"
            "out = {'instance': n, 'negative': lib.gpumem_mempool_malloc_1(-5, 0, None), 'negative_error': lib.gpumem_last_error().decode()}\n"
            "out['bad_device'] = lib.gpumem_mempool_malloc_1(1024, 99, None); out['bad_device_error'] = lib.gpumem_last_error().decode()\n"
            "print(json.dumps(out))\n"
        )
        self.assertEqual(r["instance"], 1)
        self.assertIsNone(r["negative"])
        self.assertIn("is negative", r["negative_error"])
        self.assertIsNone(r["bad_device"])
        self.assertIn("device 99", r["bad_device_error"])

    def test_allocator_without_pytorch_is_an_import_error(self):
        if torch_cuda_reason() != "PyTorch is not installed":
            self.skipTest("PyTorch is installed: this case is about a machine without it")
        with self.assertRaises(ImportError):
            gpumem_torch.allocator("uvm")


@unittest.skipUnless(HAVE_LIB, LIB_REASON or "")
class PlacementTests(unittest.TestCase):
    def test_place_sets_and_restores_this_thread_only(self):
        self.assertIsNone(gpumem_torch.thread_placement())
        seen_elsewhere = []
        with gpumem_torch.place("host"):
            self.assertEqual(gpumem_torch.thread_placement(), "host")
            with gpumem_torch.place("device"):
                self.assertEqual(gpumem_torch.thread_placement(), "device")
                t = threading.Thread(target=lambda: seen_elsewhere.append(gpumem_torch.thread_placement()))
                t.start()
                t.join()
            self.assertEqual(gpumem_torch.thread_placement(), "host")
        self.assertIsNone(gpumem_torch.thread_placement())
        self.assertEqual(seen_elsewhere, [None])

    def test_restored_after_an_exception(self):
        with self.assertRaises(KeyError):
            with gpumem_torch.place("host"):
                raise KeyError("x")
        self.assertIsNone(gpumem_torch.thread_placement())

    def test_bad_tier(self):
        with self.assertRaisesRegex(ValueError, "'auto', 'device', 'host'"):
            with gpumem_torch.place("gpu"):
                pass
        self.assertIsNone(gpumem_torch.thread_placement())
        lib = ctypes.CDLL(gpumem_torch.library_path())
        self.assertEqual(lib.gpumem_set_thread_placement(7, None), 4)


@unittest.skipUnless(HAVE_LIB, LIB_REASON or "")
class OutOfMemoryMessageTests(unittest.TestCase):
    """The message the library raises on out of memory, formatted by the C++ code itself."""

    def test_message_with_statistics(self):
        stats = {"active": 1, "reserved_bytes": 70 << 30, "allocated_bytes": 69 << 30, "largest_free_block": 512 << 20}
        m = gpumem_torch.format_oom_message("pool", 3 << 30, 0, "cudaMalloc: out of memory", stats)
        self.assertEqual(
            m,
            "CUDA out of memory. gpumem: pool could not allocate 3.00 GiB (3221225472 bytes) on device 0 "
            "(cudaMalloc: out of memory); reserved 70.00 GiB, allocated 69.00 GiB, largest free block 512.00 MiB",
        )

    def test_message_of_tiered_and_before_any_allocation(self):
        stats = {"active": 1, "reserved_bytes": 10 << 30, "allocated_bytes": 9 << 30, "host_allocated_bytes": 2 << 30}
        m = gpumem_torch.format_oom_message("tiered", 1 << 30, 1, "host budget", stats)
        self.assertIn("allocated 9.00 GiB (2.00 GiB of it on the host), largest free block n/a", m)
        m = gpumem_torch.format_oom_message("uvm", 1 << 40, 0, "limit", None)
        self.assertTrue(m.startswith("CUDA out of memory. gpumem: uvm could not allocate 1.00 TiB"), m)
        self.assertTrue(m.endswith("; nothing reserved on this device yet"), m)

    def test_the_batch_size_tools_accept_it(self):
        m = gpumem_torch.format_oom_message("expandable", 1 << 30, 0, "cuMemCreate", {"active": 1})
        # What PyTorch makes of a C++ exception from the allocator: a RuntimeError with the message.
        accepted = accepted_by_all(RuntimeError(m))
        self.assertEqual(accepted, {k: True for k in accepted}, m)
        # and not of an unrelated error
        self.assertFalse(any(accepted_by_all(RuntimeError("gpumem: free failed")).values()))


@unittest.skipIf(TORCH_REASON is not None, TORCH_REASON or "")
class AllocatorTorchTests(unittest.TestCase):
    """Allocator objects under PyTorch on a GPU."""

    def worker(self, *args):
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "allocator_worker.py"), *args],
            capture_output=True,
            text=True,
            env=clean_env(PYTHONUNBUFFERED="1"),
            timeout=600,
        )
        r = worker_result(proc.stdout)
        if r is None:
            self.fail(f"worker {args} printed no result (exit {proc.returncode})\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        self.assertTrue(r["ok"], r.get("traceback"))
        self.assertEqual(proc.returncode, 0)
        return r

    def test_change_current_allocator(self):
        r = self.worker("--mode", "current")
        self.assertTrue(r["sum_ok"])
        self.assertEqual(r["instance"], 1)
        self.assertGreaterEqual(r["allocated"], 4 * MiB)
        self.assertEqual(r["allocated_after"], 0)
        self.assertEqual(r["default_instance_active"], 0)

    def check_mempool(self, strategy):
        r = self.worker("--mode", "mempool", "--strategy", strategy)
        self.assertTrue(r["config"].startswith(f"strategy={strategy} "), r["config"])
        self.assertTrue(r["sums_ok"])
        self.assertTrue(r["inside_in_pool"], "tensors made inside use_mem_pool are in the pool's segments")
        self.assertFalse(r["outside_in_pool"], "a tensor made outside stays on PyTorch's allocator")
        # gpumem serves PyTorch's segments: its allocated bytes are the pool's segments, one allocation each.
        self.assertGreater(r["pool_segments"], 0)
        self.assertEqual(r["gpumem_allocated"], r["pool_segment_bytes"])
        self.assertEqual(r["gpumem_live_allocations"], r["pool_segments"])
        self.assertGreaterEqual(r["gpumem_reserved"], r["gpumem_allocated"])
        self.assertGreaterEqual(r["torch_reserved"], r["pool_segment_bytes"] + MiB * 4)
        self.assertEqual(r["gpumem_allocated_after_del"], r["gpumem_allocated"], "PyTorch keeps freed blocks cached in its segments")
        self.assertEqual(r["gpumem_allocated_after_pool_released"], 0, "the released pool's segments came back to gpumem")
        self.assertTrue(r["outside_ok"])

    def test_mempool_uvm(self):
        self.check_mempool("uvm")

    def test_mempool_tiered(self):
        self.check_mempool("tiered")

    def test_mempool_pool(self):
        self.check_mempool("pool")

    def test_two_strategies_in_one_process(self):
        r = self.worker("--mode", "two")
        self.assertEqual(r["instances"], [1, 2])
        self.assertTrue(r["configs"][0].startswith("strategy=uvm "))
        self.assertTrue(r["configs"][1].startswith(f"strategy=tiered tiered.device_budget={64 * MiB} "))
        self.assertTrue(r["sum_ok"])
        self.assertGreaterEqual(r["uvm_allocated"], 32 * MiB)
        self.assertGreaterEqual(r["tiered_allocated"], 160 * MiB)
        self.assertGreaterEqual(r["tiered_host_allocated"], 160 * MiB, "past its device budget, tiered spills to the host")
        self.assertEqual(r["uvm_host_allocated"], -1)

    def test_place_host(self):
        r = self.worker("--mode", "place")
        self.assertEqual(r["placement_inside"], "host")
        self.assertIsNone(r["placement_after"])
        self.assertTrue(r["sums_ok"])
        self.assertGreaterEqual(r["host_allocated_after_place"], r["h_bytes"])
        self.assertEqual(r["host_allocated_after_device"], r["host_allocated_after_place"], "outside place('host') the device tier")
        self.assertGreaterEqual(r["allocated_after_device"], 2 * r["h_bytes"])

    def test_out_of_memory_inside_a_mempool(self):
        r = self.worker("--mode", "mempool_oom")
        null_entry, raising = r["null_entry"], r["raising_entry"]
        # alloc.mem_pool(): NULL from gpumem, so PyTorch's caching allocator raises its own OutOfMemoryError.
        self.assertEqual(null_entry["raised"], "OutOfMemoryError", null_entry)
        self.assertTrue(null_entry["is_torch_oom"])
        self.assertTrue(null_entry["message"].startswith("CUDA out of memory."), null_entry["message"])
        self.assertEqual(null_entry["accepted"], {k: True for k in null_entry["accepted"]})
        self.assertTrue(null_entry["last_error"].startswith("CUDA out of memory. gpumem: pool could not allocate"), null_entry["last_error"])
        self.assertTrue(null_entry["works_after"])
        # torch.cuda.MemPool(alloc.allocator()): gpumem's own message, a RuntimeError the tools accept too.
        self.assertIsNotNone(raising["raised"])
        self.assertTrue(raising["message"].startswith("CUDA out of memory. gpumem: pool could not allocate"), raising["message"])
        self.assertEqual(raising["accepted"], {k: True for k in raising["accepted"]})
        self.assertTrue(raising["works_after"])
        self.assertGreaterEqual(r["num_ooms"], 2)

    def test_adamw_states_example(self):
        # Small (parameters 5% of the free memory) so that it runs in seconds; the example's own
        # sizes (1.2x the free memory) are run by hand: see docs/torch.md.
        example = os.path.join(BINDINGS, "examples", "adamw_states_mempool.py")
        for strategy, place in (("tiered", "auto"), ("tiered", "host"), ("uvm", "auto")):
            with self.subTest(strategy=strategy, place=place):
                proc = subprocess.run(
                    [sys.executable, example, "--strategy", strategy, "--place", place, "--fraction", "0.05", "--dim", "4096", "--steps", "2"],
                    capture_output=True, text=True, env=clean_env(), timeout=600,
                )
                self.assertEqual(proc.returncode, 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
                self.assertIn("step 2: loss", proc.stdout)
                self.assertIn("(= gpumem's allocated bytes)", proc.stdout)
                if place == "host":  # every state on the host tier
                    self.assertRegex(proc.stdout, r"gpumem.host_allocated_bytes.current\s+[1-9]")


if __name__ == "__main__":
    unittest.main(verbosity=2)
