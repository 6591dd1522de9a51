"""The drop-in shapes over the real library without a GPU: gpumem_torch.saver and
gpumem_torch.tagged_pool act through GpumemBackend's calls on device -1, the host twin of
'expandable' (mmap), with allocations made through the library's C entry points, each case in a
process of its own. What this adds to test_dropin_shapes.py's fake: the library takes the shapes' tag
names, keeps and discards content as they ask, and reports the states they read."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)

from support import clean_env, library_reason, run_code  # noqa: E402

LIB_REASON = library_reason()
if LIB_REASON:
    print(f"[test_dropin_host] skipped: {LIB_REASON}", file=sys.stderr)

MiB = 1 << 20

_PRELUDE = """
import ctypes, json
import gpumem_torch
from gpumem_torch import _dropin, _library, saver, tagged_pool
lib = _library.load()
lib.gpumem_malloc.restype = ctypes.c_void_p
lib.gpumem_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
HOST = -1
def malloc(n):
    return lib.gpumem_malloc(n, HOST, None)
def fill(p, n, seed):
    data = bytes((seed + 31 * i) & 0xFF for i in range(256)) * (n // 256)
    ctypes.memmove(p, data, n)
    return data
def same(p, data):
    return ctypes.string_at(p, len(data)) == data
def error_of(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:
        return [type(e).__name__, str(e)]
    return None

class HostBackend(_dropin.GpumemBackend):
    # The host twin stands for the device: no PyTorch, the library serves device -1.
    def _devices(self):
        return [HOST]
    def ensure_enabled(self, who):
        pass
    def cuda_initialized(self):
        return False
def states():
    return {s["tag"]: [s["asleep"], s["mode"]] for s in gpumem_torch.tag_stats(HOST)}
"""


def run_python(code):
    return run_code(_PRELUDE + code, clean_env(GPUMEM_OOM="null", PYTHONUNBUFFERED="1"), [BINDINGS])


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class SaverOnTheHostTwin(unittest.TestCase):
    def test_regions_pause_and_resume(self):
        r = run_python(
            "s = saver.MemorySaver(HostBackend())\n"
            "out = {}\n"
            "outside = malloc(1 << 20); od = fill(outside, 1 << 20, 5)\n"
            "with s.region(tag='weights', enable_cpu_backup=True):\n"
            "    w = malloc(2 * (1 << 20)); wd = fill(w, 2 * (1 << 20), 1)\n"
            "with s.region(tag='kv_cache'):\n"
            "    kv = malloc(4 * (1 << 20)); fill(kv, 4 * (1 << 20), 2)\n"
            "out['tags'] = list(states())\n"
            "s.pause('kv_cache')\n"
            "out['kv_paused'] = states()\n"
            "out['again'] = error_of(s.pause, 'kv_cache')\n"
            "out['resume_awake'] = error_of(s.resume, 'weights')\n"
            "out['still'] = states()\n"
            "s.pause('weights')\n"
            "s.resume()\n"
            "out['awake'] = states()\n"
            "out['weights_same'] = same(w, wd)\n"
            "out['outside_same'] = same(outside, od)\n"
            "out['pool_after_resume'] = gpumem_torch.backup_pool_bytes(HOST)\n"  # retain_cpu_backup False: freed
            "print(json.dumps(out))\n"
        )
        self.assertEqual(r["tags"], ["default", "saver:weights:cpu_backup", "saver:kv_cache"])
        self.assertEqual(r["kv_paused"]["saver:kv_cache"], [True, "discard"])
        self.assertEqual(r["kv_paused"]["saver:weights:cpu_backup"][0], False)
        self.assertEqual(r["again"][0], "InvalidStateError")
        self.assertEqual(r["resume_awake"][0], "InvalidStateError")
        self.assertEqual(r["still"], r["kv_paused"])  # the refused calls changed nothing
        self.assertFalse(any(asleep for asleep, _ in r["awake"].values()))
        self.assertTrue(r["weights_same"])
        self.assertTrue(r["outside_same"])
        self.assertEqual(r["pool_after_resume"], 0)

    def test_init_enable_and_disable(self):
        r = run_python(
            "import os\n"
            "os.environ['TMS_INIT_ENABLE'] = '1'; os.environ['TMS_INIT_ENABLE_CPU_BACKUP'] = '1'\n"
            "s = saver.MemorySaver(HostBackend())\n"
            "s.hook_mode = 'preload'\n"
            "m = malloc(1 << 20); md = fill(m, 1 << 20, 3)\n"
            "with s.disable():\n"
            "    d = malloc(1 << 20)\n"
            "s.pause()\n"
            "out = {'paused': states()}\n"
            "s.resume()\n"
            "out['same'] = same(m, md)\n"
            "print(json.dumps(out))\n"
        )
        self.assertEqual(r["paused"], {"saver:default:cpu_backup": [True, "keep"], "default": [False, "keep"]})
        self.assertTrue(r["same"])


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class ReadBackupOnTheHostTwin(unittest.TestCase):
    """gpumem_instance_read_backup, which the saver's get_cpu_backup reads a paused tensor through."""

    def test_reading_a_sleeping_tag_s_backup(self):
        r = run_python(
            "from gpumem_torch import _sleep\n"
            "n = 70 * (1 << 20)\n"  # past the engine's 64 MiB copy pieces
            "with gpumem_torch.region('w'):\n"
            "    w = malloc(n); wd = fill(w, n, 4)\n"
            "with gpumem_torch.region('kv'):\n"
            "    kv = malloc(1 << 20); fill(kv, 1 << 20, 6)\n"
            "buf = ctypes.create_string_buffer(n)\n"
            "def read(addr, size):\n"
            "    found = _sleep.instance_read_backup(0, addr, size, ctypes.addressof(buf), HOST)\n"
            "    return [found, found and buf.raw[:size] == wd[addr - w:addr - w + size]]\n"
            "out = {'awake': read(w, 4096)}\n"
            "gpumem_torch.sleep(keep=['w'], device=HOST)\n"
            "out['whole'] = read(w, n)\n"
            "out['across_pieces'] = read(w + (64 << 20) - 1000, 5000)\n"
            "out['inside'] = read(w + 12345, 777)\n"
            "out['past_the_end'] = read(w + n - 10, 20)[0]\n"
            "out['discarded'] = _sleep.instance_read_backup(0, kv, 4096, ctypes.addressof(buf), HOST)\n"
            "out['empty'] = _sleep.instance_read_backup(0, w, 0, ctypes.addressof(buf), HOST)\n"
            "gpumem_torch.wake(device=HOST)\n"
            "out['woken'] = read(w, 4096)\n"
            "out['same'] = same(w, wd)\n"
            "print(json.dumps(out))\n"
        )
        self.assertEqual(r["awake"], [False, False])
        self.assertEqual(r["whole"], [True, True])
        self.assertEqual(r["across_pieces"], [True, True])
        self.assertEqual(r["inside"], [True, True])
        self.assertFalse(r["past_the_end"])
        self.assertFalse(r["discarded"])
        self.assertFalse(r["empty"])
        self.assertEqual(r["woken"], [False, False])
        self.assertTrue(r["same"])


    def test_a_retained_backup_stays_readable_at_the_same_host_address(self):
        r = run_python(
            "from gpumem_torch import _sleep\n"
            "n = 3 * (1 << 20)\n"
            "with gpumem_torch.region('r'):\n"
            "    w = malloc(n); wd = fill(w, n, 8)\n"
            "out = {'awake': _sleep.instance_backup_view(0, w, n, HOST)}\n"
            "gpumem_torch.sleep('r', device=HOST)\n"
            "first = _sleep.instance_backup_view(0, w, n, HOST)\n"
            "out['paused_view'] = ctypes.string_at(first, n) == wd\n"
            "gpumem_torch.wake('r', device=HOST, retain_backup=True)\n"
            "out['retained_same_place'] = _sleep.instance_backup_view(0, w, n, HOST) == first\n"
            "wd2 = fill(w, n, 9)\n"
            "gpumem_torch.sleep('r', device=HOST)\n"
            "out['reused'] = _sleep.instance_backup_view(0, w, n, HOST) == first and ctypes.string_at(first, n) == wd2\n"
            "gpumem_torch.wake('r', device=HOST)\n"
            "out['released'] = _sleep.instance_backup_view(0, w, n, HOST)\n"
            "out['same'] = same(w, wd2)\n"
            "out['bad_flag'] = error_of(gpumem_torch.wake, 'r', device=HOST, retain_backup=1)\n"
            "print(json.dumps(out))\n"
        )
        self.assertIsNone(r["awake"])
        self.assertTrue(r["paused_view"])
        self.assertTrue(r["retained_same_place"])
        self.assertTrue(r["reused"])
        self.assertIsNone(r["released"])
        self.assertTrue(r["same"])
        self.assertEqual(r["bad_flag"][0], "TypeError")

    def test_the_saver_s_pause_keeps_the_cache_for_resume(self):
        r = run_python(
            "s = saver.MemorySaver(HostBackend())\n"
            "lib.gpumem_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]\n"
            "with s.region(tag='engine', enable_cpu_backup=True):\n"
            "    keep = malloc(1 << 20); kd = fill(keep, 1 << 20, 2)\n"
            "    scratch = malloc(8 << 20)\n"
            "lib.gpumem_free(scratch, 8 << 20, HOST, None)\n"  # cached, as PyTorch's segments under the peer
            "held = {t['tag']: t['device_bytes'] for t in gpumem_torch.tag_stats(HOST)}\n"
            "s.pause()\n"
            "paused = {t['tag']: t['device_bytes'] for t in gpumem_torch.tag_stats(HOST)}\n"
            "s.resume()\n"
            "resumed = {t['tag']: t['device_bytes'] for t in gpumem_torch.tag_stats(HOST)}\n"
            "print(json.dumps({'held': held, 'paused': paused, 'resumed': resumed, 'same': same(keep, kd)}))\n"
        )
        tag = "saver:engine:cpu_backup"
        self.assertGreaterEqual(r["held"][tag], 9 << 20)
        self.assertEqual(r["paused"][tag], 0)
        self.assertEqual(r["resumed"][tag], r["held"][tag])  # the cache too, as the peer's resume
        self.assertTrue(r["same"])


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class TaggedPoolOnTheHostTwin(unittest.TestCase):
    def test_sleep_and_wake_up(self):
        r = run_python(
            "p = tagged_pool.TaggedPool(HostBackend())\n"
            "outside = malloc(1 << 20)\n"
            "with p.use_memory_pool(tag='weights'):\n"
            "    w = malloc(2 * (1 << 20)); wd = fill(w, 2 * (1 << 20), 1)\n"
            "with p.use_memory_pool(tag='kv_cache'):\n"
            "    kv = malloc(3 * (1 << 20))\n"
            "out = {'usage': p.get_current_usage()}\n"
            "p.sleep(offload_tags=('weights',))\n"
            "out['asleep'] = states()\n"
            "p.wake_up(['weights'])\n"
            "out['weights_only'] = states()\n"
            "out['same'] = same(w, wd)\n"
            "p.wake_up()\n"
            "out['awake'] = states()\n"
            "print(json.dumps(out))\n"
        )
        self.assertEqual(r["usage"], 5 * MiB)
        self.assertEqual(r["asleep"], {"default": [False, "keep"], "pool:weights": [True, "keep"], "pool:kv_cache": [True, "discard"]})
        self.assertEqual(r["weights_only"]["pool:weights"][0], False)
        self.assertEqual(r["weights_only"]["pool:kv_cache"][0], True)
        self.assertTrue(r["same"])
        self.assertFalse(any(asleep for asleep, _ in r["awake"].values()))


if __name__ == "__main__":
    unittest.main()
