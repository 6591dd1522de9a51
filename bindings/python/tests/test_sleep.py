"""Sleep and wake by tag in libgpumem_torch.so and gpumem_torch (npm run test:torch).

- RegionTests, HostSleepTests and ErrorTests need only the built library: the host cases allocate on
  device -1, the host twin of 'expandable' (mmap), through the library's C entry points, and run
  each in a process of its own (the library's configuration and the process tag are per process).
- GpuSleepTests need PyTorch with a CUDA device; otherwise they are skipped with the reason. Each
  case runs sleep_worker.py in a process of its own.
"""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)

import gpumem_torch  # noqa: E402
from support import clean_env, run_code, skip_reasons, worker_result  # noqa: E402

LIB_REASON, TORCH_REASON = skip_reasons("test_sleep", "GPU tests")
HAVE_LIB = LIB_REASON is None

MiB = 1 << 20

# Allocation on the host twin through the C entry points: instance 0 (GPUMEM_OOM=null: NULL rather
# than an exception on failure, which ctypes could not catch).
_PRELUDE = """
import ctypes, json, gpumem_torch
from gpumem_torch import _library
lib = _library.load()
lib.gpumem_malloc.restype = ctypes.c_void_p
lib.gpumem_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
lib.gpumem_free.restype = None
lib.gpumem_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
HOST = -1
def malloc(n):
    return lib.gpumem_malloc(n, HOST, None)
def fill(p, n, seed):
    data = bytes((seed + 31 * i) & 0xFF for i in range(256)) * (n // 256)
    ctypes.memmove(p, data, n)
    return data
def error_of(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:
        return [type(e).__name__, str(e)]
    return None
"""


def run_python(code, **env):
    """Runs `code` after _PRELUDE in a fresh interpreter; returns the JSON of its last line."""
    return run_code(_PRELUDE + code, clean_env(**{"GPUMEM_OOM": "null", "PYTHONUNBUFFERED": "1", **env}), [BINDINGS])


def assert_error(test, error, kind, *parts):
    """`error` is error_of's [type name, message]: of type `kind`, each of `parts` in its message."""
    test.assertEqual(error[0], kind)
    for part in parts:
        test.assertIn(part, error[1])


@unittest.skipUnless(HAVE_LIB, LIB_REASON or "")
class RegionTests(unittest.TestCase):
    def test_regions_nest_and_restore(self):
        r = run_python(
            "out = [gpumem_torch.current_tag()]\n"
            "with gpumem_torch.region('weights'):\n"
            "    out.append(gpumem_torch.current_tag())\n"
            "    with gpumem_torch.region('kv'):\n"
            "        out.append(gpumem_torch.current_tag())\n"
            "    out.append(gpumem_torch.current_tag())\n"
            "    try:\n"
            "        with gpumem_torch.region('inner'):\n"
            "            raise KeyError('x')\n"
            "    except KeyError:\n"
            "        out.append(gpumem_torch.current_tag())\n"
            "out.append(gpumem_torch.current_tag())\n"
            "print(json.dumps(out))\n"
        )
        self.assertEqual(r, ["default", "weights", "kv", "weights", "weights", "default"])

    def test_the_tag_is_the_process_s(self):
        # autograd's backward allocates on threads of its own: they must see the region's tag
        r = run_python(
            "import threading\n"
            "seen = []\n"
            "with gpumem_torch.region('grads'):\n"
            "    t = threading.Thread(target=lambda: seen.append(gpumem_torch.current_tag()))\n"
            "    t.start(); t.join()\n"
            "    p = malloc(1 << 20)\n"
            "print(json.dumps({'thread': seen[0], 'tags': [s['tag'] for s in gpumem_torch.tag_stats(HOST)]}))\n"
        )
        self.assertEqual(r, {"thread": "grads", "tags": ["grads"]})

    def test_bad_names(self):
        r = run_python(
            "out = {}\n"
            "for name, tag in (('empty', ''), ('nul', 'a\\x00b'), ('control', 'a\\nb'), ('long', 'x' * 129), ('number', 7)):\n"
            "    try:\n"
            "        with gpumem_torch.region(tag):\n"
            "            pass\n"
            "    except Exception as e:\n"
            "        out[name] = [type(e).__name__, str(e)]\n"
            "out['after'] = gpumem_torch.current_tag()\n"
            "with gpumem_torch.region('ünïcode ✓'):\n"
            "    out['unicode'] = gpumem_torch.current_tag()\n"
            "print(json.dumps(out))\n"
        )
        assert_error(self, r["empty"], "ValueError", "non-empty")
        assert_error(self, r["nul"], "ValueError")
        assert_error(self, r["control"], "ValueError", "control")
        assert_error(self, r["long"], "ValueError", "128")
        assert_error(self, r["number"], "TypeError")
        self.assertEqual(r["after"], "default")
        self.assertEqual(r["unicode"], "ünïcode ✓")


@unittest.skipUnless(HAVE_LIB, LIB_REASON or "")
class HostSleepTests(unittest.TestCase):
    """'expandable' on the host twin: the same leaf and engine as on a device, memcpy for the copies."""

    def test_keep_and_discard(self):
        r = run_python(
            "out = {}\n"
            "with gpumem_torch.region('weights'):\n"
            "    w = malloc(3 * (1 << 20)); wdata = fill(w, 3 * (1 << 20), 1)\n"
            "with gpumem_torch.region('kv'):\n"
            "    kv = malloc(5 * (1 << 20)); fill(kv, 5 * (1 << 20), 2)\n"
            "    kv2 = malloc(1 << 20)\n"
            "out['before'] = gpumem_torch.tag_stats(HOST)\n"
            "out['sleep'] = gpumem_torch.sleep(keep=['weights'], device=HOST)\n"
            "out['asleep'] = gpumem_torch.tag_stats(HOST)\n"
            "out['again'] = gpumem_torch.sleep('kv', device=HOST)\n"
            "with gpumem_torch.region('kv'):\n"
            "    out['alloc_null'] = malloc(4096) is None\n"
            "    out['alloc_error'] = gpumem_torch.last_error()\n"
            "lib.gpumem_free(kv2, 1 << 20, HOST, None)\n"  # freeing while asleep is fine
            "with gpumem_torch.region('other'):\n"
            "    o = malloc(1 << 20)\n"  # another tag allocates while these sleep
            "out['other_ok'] = o is not None\n"
            "out['wake'] = gpumem_torch.wake(['weights', 'kv', 'other'], device=HOST)\n"
            "out['same'] = ctypes.string_at(w, 3 * (1 << 20)) == wdata\n"
            "fill(kv, 5 * (1 << 20), 3)\n"  # a discarded tag's blocks are usable again (content undefined)
            "out['awake'] = gpumem_torch.tag_stats(HOST)\n"
            "out['wake_again'] = gpumem_torch.wake(device=HOST)\n"
            "out['pool'] = gpumem_torch.backup_pool_bytes(HOST)\n"
            "gpumem_torch.trim_backup(HOST)\n"
            "out['pool_trimmed'] = gpumem_torch.backup_pool_bytes(HOST)\n"
            "print(json.dumps(out))\n"
        )
        before = {s["tag"]: s for s in r["before"]}
        self.assertEqual(list(before), ["weights", "kv"])
        self.assertEqual(before["weights"]["allocated_bytes"], 3 * MiB)
        self.assertEqual(before["kv"]["allocated_bytes"], 6 * MiB)
        self.assertFalse(before["kv"]["asleep"])
        held = before["weights"]["device_bytes"] + before["kv"]["device_bytes"]

        s = r["sleep"]
        self.assertEqual(s["changed"], ["weights", "kv"])
        self.assertEqual(s["unchanged"], [])
        self.assertEqual(s["device_bytes"], held)  # everything the leaf held, live and cached
        self.assertEqual(s["copied_bytes"], 3 * MiB)  # weights keep, kv discards
        self.assertGreaterEqual(s["seconds"], 0)

        asleep = {t["tag"]: t for t in r["asleep"]}
        self.assertTrue(asleep["weights"]["asleep"] and asleep["kv"]["asleep"])
        self.assertEqual((asleep["weights"]["mode"], asleep["kv"]["mode"]), ("keep", "discard"))
        self.assertEqual(asleep["weights"]["device_bytes"], 0)
        self.assertEqual(asleep["weights"]["slept_bytes"], before["weights"]["device_bytes"])
        self.assertGreaterEqual(asleep["weights"]["backup_bytes"], 3 * MiB)
        self.assertEqual(asleep["kv"]["backup_bytes"], 0)

        self.assertEqual(r["again"]["changed"], [])
        self.assertEqual(r["again"]["unchanged"], ["kv"])
        self.assertTrue(r["alloc_null"])
        self.assertIn("tag 'kv' is asleep: wake it before allocating in it", r["alloc_error"])
        self.assertTrue(r["other_ok"])

        self.assertEqual(r["wake"]["changed"], ["weights", "kv"])
        self.assertEqual(r["wake"]["unchanged"], ["other"])
        self.assertEqual(r["wake"]["copied_bytes"], 3 * MiB)
        self.assertTrue(r["same"])
        awake = {t["tag"]: t for t in r["awake"]}
        self.assertFalse(any(t["asleep"] for t in awake.values()))
        self.assertEqual(awake["kv"]["allocated_bytes"], 5 * MiB)  # kv2 was freed while asleep
        self.assertEqual(r["wake_again"]["changed"], [])
        self.assertGreater(r["pool"], 0)  # the backup's host memory is kept for the next sleep
        self.assertEqual(r["pool_trimmed"], 0)

    def test_content_survives_cycles(self):
        r = run_python(
            "with gpumem_torch.region('a'):\n"
            "    p = malloc(2 * (1 << 20) + 123); data = fill(p, 2 * (1 << 20), 9)\n"
            "same = []\n"
            "for _ in range(3):\n"
            "    gpumem_torch.sleep('a', device=HOST)\n"
            "    gpumem_torch.wake('a', device=HOST)\n"
            "    same.append(ctypes.string_at(p, 2 * (1 << 20)) == data)\n"
            "print(json.dumps(same))\n"
        )
        self.assertEqual(r, [True, True, True])


@unittest.skipUnless(HAVE_LIB, LIB_REASON or "")
class ErrorTests(unittest.TestCase):
    def test_unknown_tags(self):
        r = run_python(
            "out = {'fresh': error_of(gpumem_torch.sleep, 'kv', device=HOST)}\n"
            "out['fresh_all'] = error_of(gpumem_torch.sleep, device=HOST)\n"  # nothing allocated: no allocator to act on
            "with gpumem_torch.region('weights'):\n"
            "    malloc(1 << 20)\n"
            "out['sleep'] = error_of(gpumem_torch.sleep, ['weights', 'nope'], device=HOST)\n"
            "out['wake'] = error_of(gpumem_torch.wake, 'nope', device=HOST)\n"
            "out['stats'] = gpumem_torch.tag_stats(HOST)\n"
            "out['empty'] = error_of(gpumem_torch.sleep, [], device=HOST)\n"
            "out['keep'] = error_of(gpumem_torch.sleep, keep=1, device=HOST)\n"
            "out['device'] = error_of(gpumem_torch.sleep, device=99)\n"
            "print(json.dumps(out))\n"
        )
        assert_error(self, r["fresh"], "ValueError", "no allocation was ever tagged 'kv'")
        assert_error(self, r["fresh_all"], "NotEnabledError", "nothing is enabled on device -1")
        assert_error(self, r["sleep"], "ValueError", "'nope'", "'weights'")  # and the tags it knows
        assert_error(self, r["wake"], "ValueError")
        self.assertFalse(r["stats"][0]["asleep"])  # the failed sleep changed nothing
        assert_error(self, r["empty"], "ValueError", "None")
        assert_error(self, r["keep"], "TypeError")
        assert_error(self, r["device"], "ValueError")

    def test_a_strategy_that_cannot_sleep(self):
        r = run_python(
            "out = {}\n"
            "for name, call in (('sleep', gpumem_torch.sleep), ('wake', gpumem_torch.wake), ('stats', gpumem_torch.tag_stats)):\n"
            "    out[name] = error_of(call, device=0)\n"
            "out['flags'] = {s['name']: s['flags']['sleep'] for s in gpumem_torch.strategies()}\n"
            "print(json.dumps(out))\n",
            GPUMEM_ALLOCATOR="pool",
        )
        for call in ("sleep", "wake", "stats"):
            assert_error(self, r[call], "InvalidStateError", "strategy 'pool' cannot sleep")
        sleeping = sorted(name for name, flag in r["flags"].items() if flag)
        self.assertIn("expandable", sleeping)
        self.assertIn(", ".join(n for n in (s["name"] for s in gpumem_torch.strategies()) if n in sleeping), r["sleep"][1])

    def test_out_of_memory_is_torch_s_where_torch_is_imported(self):
        # Without PyTorch gpumem's own class; with it, one that is also torch.OutOfMemoryError.
        r = run_python(
            "from gpumem_torch import _sleep\n"
            "plain = _sleep._out_of_memory('short')\n"
            "import types\n"
            "torch = types.ModuleType('torch')\n"
            "class TorchOOM(RuntimeError): pass\n"
            "torch.OutOfMemoryError = TorchOOM\n"
            "sys.modules['torch'] = torch\n"
            "both = _sleep._out_of_memory('short')\n"
            "print(json.dumps({'plain': [type(plain).__name__, isinstance(plain, gpumem_torch.OutOfMemoryError), isinstance(plain, TorchOOM)],\n"
            "                  'both': [isinstance(both, gpumem_torch.OutOfMemoryError), isinstance(both, TorchOOM), str(both)]}))\n"
        )
        self.assertEqual(r["plain"], ["OutOfMemoryError", True, False])
        self.assertEqual(r["both"], [True, True, "short"])


def run_worker(mode, timeout=600):
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "sleep_worker.py"), mode], capture_output=True, text=True, env=clean_env(PYTHONUNBUFFERED="1"), timeout=timeout
    )
    result = worker_result(proc.stdout)
    if result is None:
        raise AssertionError(f"sleep_worker {mode} printed no result (exit {proc.returncode})\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    if "exception" in result:
        raise AssertionError(f"sleep_worker {mode} failed:\n{result['exception']}\nstderr:\n{proc.stderr[-2000:]}")
    return result


@unittest.skipIf(TORCH_REASON, TORCH_REASON or "")
class GpuSleepTests(unittest.TestCase):
    def check_device_freed(self, r):
        # mem_get_info's free memory rose by about the tag's bytes (its granules, rounded up)
        self.assertGreaterEqual(r["freed"], r["tag_bytes"] * 0.95)
        self.assertLessEqual(r["freed"], r["report"]["device_bytes"] + 64 * MiB)

    def test_keep(self):
        r = run_worker("keep")
        self.assertEqual(r["report"]["changed"], ["kv"])
        self.assertEqual(r["report"]["copied_bytes"], r["tag_bytes"])
        self.check_device_freed(r)
        self.assertTrue(r["weights_untouched"])
        self.assertTrue(r["same_content"])
        self.assertTrue(r["same_ptr"])
        self.assertIn("is asleep", r["alloc_while_asleep"][1])
        self.assertEqual(r["alloc_while_asleep"][0], "RuntimeError")
        self.assertLessEqual(abs(r["returned"] - r["wake"]["device_bytes"]), 64 * MiB)  # wake took as much back
        self.assertEqual(r["reserved_all_asleep"], 0)  # every tag asleep: no device memory held
        self.assertTrue(r["weights_after_all"])

    def test_discard(self):
        r = run_worker("discard")
        self.assertEqual(r["report"]["copied_bytes"], 0)
        self.check_device_freed(r)
        self.assertTrue(r["same_ptr"])
        self.assertTrue(r["usable"])

    def test_wake_without_room(self):
        r = run_worker("wake_oom")
        self.assertEqual(r["error"][0], "OutOfMemoryError")
        self.assertTrue(r["is_torch_oom"] and r["is_gpumem_oom"])
        self.assertTrue(r["still_asleep"])
        self.assertTrue(r["same_content"])

    def test_mempool(self):
        r = run_worker("mempool")
        self.assertEqual(r["report"]["changed"], ["kv"])
        self.check_device_freed(r)
        self.assertTrue(r["same_content"])
        self.assertTrue(r["same_ptr"])
        # PyTorch's caching allocator turns the NULL it gets into its own out-of-memory error; the
        # cause is gpumem's last error on the thread (region()'s exit leaves it alone)
        self.assertEqual(r["alloc_while_asleep"][0], "OutOfMemoryError")
        self.assertIn("tag 'kv' is asleep", r["last_error"])

    def test_cuda_graph(self):
        # capture under enable() works with 'expandable'; the graph replays over woken weights
        r = run_worker("graph")
        self.assertTrue(r["captured"], r.get("capture_error"))
        self.assertEqual(r["report"]["changed"], ["weights"])
        self.assertGreater(r["report"]["copied_bytes"], 0)
        self.assertTrue(r["same_output"])

if __name__ == "__main__":
    unittest.main()
