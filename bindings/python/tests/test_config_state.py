"""What the Python package says about the library's configuration and state, without PyTorch or a
GPU (the built library only; each case in a fresh interpreter, the configuration being per process):

- config() reads the configuration, and the library keeps it: check_config() with another strategy
  afterwards is an error, not the old configuration returned as if it were the new one;
- enable() checks the strategy name and options before it imports PyTorch, so that a misspelt name
  is the error even where PyTorch is missing;
- sleep(), wake() and tag_stats() with nothing enabled are NotEnabledError, not an empty success.
"""

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
    print(f"[test_config_state] skipped: {LIB_REASON}", file=sys.stderr)

_PRELUDE = """
import json, os, sys
import gpumem_torch
def error_of(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:
        return [type(e).__name__, str(e)]
    return None
"""

# PyTorch made unimportable, as where it is not installed (import torch: ModuleNotFoundError).
_NO_TORCH = "sys.modules['torch'] = None\n"


def run_python(code, **env):
    return run_code(_PRELUDE + code, clean_env(**env), [BINDINGS])


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class ConfigThenCheckTests(unittest.TestCase):
    def test_check_config_with_another_strategy_after_config(self):
        r = run_python(
            "out = {'config': gpumem_torch.config()}\n"
            "out['pool'] = error_of(gpumem_torch.check_config, 'pool')\n"
            "out['env'] = os.environ.get('GPUMEM_ALLOCATOR')\n"
            "out['same'] = gpumem_torch.check_config()\n"
            "out['after'] = gpumem_torch.config()\n"
            "print(json.dumps(out))\n"
        )
        self.assertTrue(r["config"].startswith("strategy=expandable "), r["config"])
        self.assertEqual(r["pool"][0], "RuntimeError")
        self.assertIn("already read its configuration (strategy=expandable", r["pool"][1])
        self.assertIsNone(r["env"], "the refused strategy was left in the environment")
        self.assertEqual(r["same"], r["config"])  # asking for nothing new is fine
        self.assertEqual(r["after"], r["config"])

    def test_the_same_configuration_spelt_out_after_config(self):
        r = run_python(
            "c = gpumem_torch.config()\n"
            "print(json.dumps({'config': c, 'same': gpumem_torch.check_config('expandable'),\n"
            "                  'option': error_of(gpumem_torch.check_config, 'expandable', unmap_idle_before_growth=True)}))\n"
        )
        self.assertEqual(r["same"], r["config"])  # the default named is the same configuration
        self.assertEqual(r["option"][0], "RuntimeError")  # an option the kept one lacks is not ignored either
        self.assertIn("GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH cannot change", r["option"][1])

    def test_deprecated_spellings_read_before(self):
        # The library read GPUMEM_NATIVE_LIBRARY (plug-in's older variable): the same configuration.
        r = run_python(
            "import warnings; warnings.simplefilter('ignore')\n"
            "c = gpumem_torch.config()\nprint(json.dumps([c, gpumem_torch.check_config()]))\n",
            GPUMEM_ALLOCATOR="native",
            GPUMEM_NATIVE_LIBRARY="/opt/lib/slab.so",
        )
        self.assertEqual(r[0], r[1])
        self.assertTrue(r[1].startswith("strategy=plugin plugin.library=/opt/lib/slab.so "))

    def test_the_same_strategy_after_config(self):
        r = run_python("c = gpumem_torch.config()\nprint(json.dumps([c, gpumem_torch.check_config('pool')]))\n", GPUMEM_ALLOCATOR="pool")
        self.assertEqual(r[0], r[1])
        self.assertTrue(r[1].startswith("strategy=pool "))

    def test_a_first_allocation_read_the_configuration(self):
        # A C caller's first allocation reads the environment (host twin: no GPU): the library keeps
        # 'expandable'; a later check_config('pool') must not report success.
        r = run_python(
            "import ctypes\n"
            "from gpumem_torch import _library\n"
            "lib = _library.load()\n"
            "lib.gpumem_malloc.restype = ctypes.c_void_p\n"
            "lib.gpumem_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]\n"
            "p = lib.gpumem_malloc(4096, -1, None)\n"
            "print(json.dumps({'alloc': p is not None, 'pool': error_of(gpumem_torch.check_config, 'pool'),\n"
            "                  'env': os.environ.get('GPUMEM_ALLOCATOR')}))\n",
            GPUMEM_OOM="null",
        )
        self.assertTrue(r["alloc"])
        self.assertEqual(r["pool"][0], "RuntimeError")
        self.assertIn("the environment's (strategy=pool ", r["pool"][1])
        self.assertIn("cannot take effect in this process", r["pool"][1])
        self.assertIsNone(r["env"])


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class EnableChecksFirstTests(unittest.TestCase):
    def test_a_bad_name_without_torch(self):
        r = run_python(
            _NO_TORCH + "print(json.dumps({'pol': error_of(gpumem_torch.enable, 'pol'),\n"
            "                  'option': error_of(gpumem_torch.enable, 'pool', max_reserved='4GB'),\n"
            "                  'keyword': error_of(gpumem_torch.enable, 'pool', bogus=1),\n"
            "                  'good': error_of(gpumem_torch.enable, 'pool'),\n"
            "                  'env': os.environ.get('GPUMEM_ALLOCATOR')}))\n"
        )
        self.assertEqual(r["pol"][0], "ValueError")
        self.assertIn("'pol'", r["pol"][1])
        self.assertEqual(r["option"][0], "ValueError")
        self.assertIn("4GiB", r["option"][1])
        self.assertEqual(r["keyword"][0], "TypeError")
        self.assertEqual(r["good"][0], "ModuleNotFoundError")  # a valid request: PyTorch is what is missing
        self.assertIsNone(r["env"])  # nothing was set for any of them


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class NothingEnabledTests(unittest.TestCase):
    def test_sleep_wake_and_stats_with_nothing_enabled(self):
        r = run_python(
            "out = {}\n"
            "for name in ('sleep', 'wake', 'tag_stats'):\n"
            "    out[name] = error_of(getattr(gpumem_torch, name), device=-1)\n"
            "out['sub'] = issubclass(gpumem_torch.NotEnabledError, gpumem_torch.InvalidStateError)\n"
            "print(json.dumps(out))\n"
        )
        for name in ("sleep", "wake", "tag_stats"):
            with self.subTest(call=name):
                self.assertEqual(r[name][0], "NotEnabledError")
                self.assertIn(f"{name}: nothing is enabled on device -1", r[name][1])
                self.assertIn("gpumem_torch.enable()", r[name][1])
        self.assertTrue(r["sub"])

    def test_once_the_allocator_exists(self):
        r = run_python(
            "import ctypes\n"
            "from gpumem_torch import _library\n"
            "lib = _library.load()\n"
            "lib.gpumem_malloc.restype = ctypes.c_void_p\n"
            "lib.gpumem_malloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]\n"
            "with gpumem_torch.region('kv'):\n"
            "    lib.gpumem_malloc(1 << 20, -1, None)\n"
            "print(json.dumps({'sleep': gpumem_torch.sleep(device=-1)['changed'], 'stats': [s['tag'] for s in gpumem_torch.tag_stats(-1)],\n"
            "                  'wake': gpumem_torch.wake(device=-1)['changed']}))\n",
            GPUMEM_OOM="null",
        )
        self.assertEqual(r, {"sleep": ["kv"], "stats": ["kv"], "wake": ["kv"]})


if __name__ == "__main__":
    unittest.main()
