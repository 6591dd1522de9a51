"""libgpumem_torch.so with a strategy from a plug-in library (GPUMEM_ALLOCATOR=plugin with
GPUMEM_PLUGIN_LIBRARY=<path>; 'native', its older name, and plugin:<path> are deprecated spellings):
the example slab library (examples/cpp, built beside the torch library by ``npm run build:native``).

- PluginConfigTests need only the built torch library (no PyTorch, no GPU).
- PluginTorchTests need PyTorch with a CUDA device as well; otherwise they are skipped with the
  reason printed. Each runs in a process of its own (the allocator is chosen before CUDA starts).

The example library is found at $GPUMEM_EXAMPLE_SLAB or beside libgpumem_torch.so.
"""

from support import torch_cuda_reason
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)

import gpumem_torch  # noqa: E402

TORCH_LIB = gpumem_torch.library_path()
SLAB_LIB = os.environ.get("GPUMEM_EXAMPLE_SLAB") or os.path.join(os.path.dirname(TORCH_LIB), "libgpumem_example_slab.so")

if not os.path.exists(TORCH_LIB):
    LIB_REASON = f"libgpumem_torch.so not found at {TORCH_LIB} (build native/ with CUDA or set GPUMEM_TORCH_LIB)"
elif not os.path.exists(SLAB_LIB):
    LIB_REASON = f"the example plug-in is not found at {SLAB_LIB} (npm run build:native, or set GPUMEM_EXAMPLE_SLAB)"
else:
    LIB_REASON = None


def _torch_reason():
    if LIB_REASON:
        return LIB_REASON
    return torch_cuda_reason()


TORCH_REASON = _torch_reason()
if LIB_REASON:
    print(f"[test_plugin] plug-in config tests skipped: {LIB_REASON}", file=sys.stderr)
if TORCH_REASON:
    print(f"[test_plugin] plug-in PyTorch tests skipped: {TORCH_REASON}", file=sys.stderr)


def run_process(code, **env_overrides):
    """Runs `code` in a fresh interpreter with only the given GPUMEM_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    env["GPUMEM_TORCH_LIB"] = TORCH_LIB
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


def run_python(code, **env_overrides):
    """run_process, and the JSON object `code` prints last."""
    proc = run_process(code, **env_overrides)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


_CHECK = (
    "import json, sys; sys.path.insert(0, {bindings!r}); import gpumem_torch\n"
    "try:\n"
    "    print(json.dumps({{'config': gpumem_torch.check_config()}}))\n"
    "except ValueError as e:\n"
    "    print(json.dumps({{'error': str(e)}}))\n"
).format(bindings=BINDINGS)


@unittest.skipIf(LIB_REASON is not None, LIB_REASON or "")
class PluginConfigTests(unittest.TestCase):
    """GPUMEM_ALLOCATOR=plugin, GPUMEM_PLUGIN_LIBRARY and GPUMEM_PLUGIN_OPTIONS are read and checked
    up front."""

    def test_plugin_with_its_library_variable(self):
        proc = run_process(_CHECK, GPUMEM_ALLOCATOR="plugin", GPUMEM_PLUGIN_LIBRARY=SLAB_LIB, GPUMEM_PLUGIN_OPTIONS="slab_bytes=2MiB")
        self.assertEqual(
            json.loads(proc.stdout)["config"], f"strategy=plugin plugin.library={SLAB_LIB} plugin.options=slab_bytes=2MiB oom=raise"
        )
        self.assertNotIn("deprecated", proc.stderr)

    def test_plugin_prefix_keeps_the_path_and_options(self):
        r = run_python(_CHECK, GPUMEM_ALLOCATOR=f"plugin:{SLAB_LIB}", GPUMEM_PLUGIN_OPTIONS="slab_bytes=2MiB;max_class=4096")
        self.assertEqual(r["config"], f"strategy=plugin plugin.library={SLAB_LIB} plugin.options=slab_bytes=2MiB;max_class=4096 oom=raise")

    def test_native_is_the_older_name_of_plugin_with_a_warning(self):
        # 'native' and GPUMEM_NATIVE_LIBRARY: the same strategy, each deprecation said on stderr.
        proc = run_process(_CHECK, GPUMEM_ALLOCATOR="Native", GPUMEM_NATIVE_LIBRARY=SLAB_LIB, GPUMEM_PLUGIN_OPTIONS="slab_bytes=2MiB")
        self.assertEqual(
            json.loads(proc.stdout)["config"], f"strategy=plugin plugin.library={SLAB_LIB} plugin.options=slab_bytes=2MiB oom=raise"
        )
        self.assertIn("GPUMEM_ALLOCATOR=native is deprecated and will be removed; use GPUMEM_ALLOCATOR=plugin", proc.stderr)
        self.assertIn("GPUMEM_NATIVE_LIBRARY is deprecated and will be removed; use GPUMEM_PLUGIN_LIBRARY", proc.stderr)
        # The new name with the old variable, and the other way round.
        r = run_python(_CHECK, GPUMEM_ALLOCATOR="plugin", GPUMEM_NATIVE_LIBRARY=SLAB_LIB)
        self.assertTrue(r["config"].startswith(f"strategy=plugin plugin.library={SLAB_LIB} "), r)
        r = run_python(_CHECK, GPUMEM_ALLOCATOR="native", GPUMEM_PLUGIN_LIBRARY=SLAB_LIB)
        self.assertTrue(r["config"].startswith(f"strategy=plugin plugin.library={SLAB_LIB} "), r)

    def test_both_library_variables_is_an_error(self):
        error = run_python(_CHECK, GPUMEM_ALLOCATOR="plugin", GPUMEM_PLUGIN_LIBRARY=SLAB_LIB, GPUMEM_NATIVE_LIBRARY="/b.so")["error"]
        self.assertIn("GPUMEM_NATIVE_LIBRARY='/b.so' is not valid: expected GPUMEM_PLUGIN_LIBRARY alone", error)

    def test_plugin_needs_a_library(self):
        for name in ("plugin", "native"):
            with self.subTest(strategy=name):
                error = run_python(_CHECK, GPUMEM_ALLOCATOR=name)["error"]
                self.assertIn("GPUMEM_ALLOCATOR=plugin needs GPUMEM_PLUGIN_LIBRARY=", error)
        for variable in ("GPUMEM_PLUGIN_LIBRARY", "GPUMEM_NATIVE_LIBRARY"):
            with self.subTest(variable=variable):
                error = run_python(_CHECK, GPUMEM_ALLOCATOR="pool", **{variable: SLAB_LIB})["error"]
                self.assertIn(f"{variable}='{SLAB_LIB}' is not valid: expected GPUMEM_ALLOCATOR=plugin as well", error)

    def test_empty_path_is_an_error(self):
        error = run_python(_CHECK, GPUMEM_ALLOCATOR="plugin:")["error"]
        self.assertIn("GPUMEM_ALLOCATOR", error)
        self.assertIn("plugin:<path", error)

    def test_plugin_options_need_the_plugin_strategy(self):
        error = run_python(_CHECK, GPUMEM_ALLOCATOR="pool", GPUMEM_PLUGIN_OPTIONS="a=1")["error"]
        self.assertIn("GPUMEM_PLUGIN_OPTIONS", error)
        self.assertIn("GPUMEM_ALLOCATOR=plugin", error)

    def test_plugin_prefix_is_deprecated_with_a_warning(self):
        proc = run_process(_CHECK, GPUMEM_ALLOCATOR=f"plugin:{SLAB_LIB}")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("strategy=plugin", proc.stdout)
        self.assertIn("GPUMEM_ALLOCATOR=plugin:<path> is deprecated", proc.stderr)
        self.assertIn("use GPUMEM_ALLOCATOR=plugin with GPUMEM_PLUGIN_LIBRARY=<path>", proc.stderr)
        error = run_python(_CHECK, GPUMEM_ALLOCATOR=f"plugin:{SLAB_LIB}", GPUMEM_PLUGIN_LIBRARY="/b.so")["error"]
        self.assertIn("GPUMEM_PLUGIN_LIBRARY='/b.so' is not valid: expected GPUMEM_ALLOCATOR=plugin (plugin:<path> names the library itself)", error)


_TENSOR_OP = """
import json, sys
sys.path.insert(0, {bindings!r})
import gpumem_torch
result = {{"config": gpumem_torch.enable()}}
import torch
torch.manual_seed(0)
a = torch.randn(256, 128, device="cuda")
b = torch.randn(128, 64, device="cuda")
c = torch.relu(a @ b) + 1.0
expected = torch.relu(a.cpu() @ b.cpu()) + 1.0
result["close"] = bool(torch.allclose(c.cpu(), expected, rtol=1e-3, atol=1e-3))
small = [torch.full((100,), float(i), device="cuda") for i in range(50)]
result["small_ok"] = all(float(t.sum().item()) == 100.0 * i for i, t in enumerate(small))
s = gpumem_torch.raw_stats(0)
result["allocated"] = s["allocated_bytes"]
result["reserved"] = s["reserved_bytes"]
result["upstream_allocs"] = s["upstream_alloc_count"]
result["live_allocs"] = s["alloc_count"] - s["free_count"]
del a, b, c, small
torch.cuda.synchronize()
# PyTorch keeps cuBLAS workspaces allocated through the current allocator.
getattr(torch._C, "_cuda_clearCublasWorkspaces", lambda: None)()
gpumem_torch.empty_cache()
result["reserved_after_trim"] = gpumem_torch.raw_stats(0)["reserved_bytes"]
result["allocated_after"] = gpumem_torch.raw_stats(0)["allocated_bytes"]
print(json.dumps(result))
""".format(bindings=BINDINGS)

_BAD_LIBRARY = """
import json, sys
sys.path.insert(0, {bindings!r})
import gpumem_torch
gpumem_torch.enable()
import torch
result = {{}}
try:
    torch.zeros(1000, device="cuda")
    result["raised"] = None
except Exception as e:
    result["raised"] = type(e).__name__
    result["message"] = str(e)
print(json.dumps(result))
""".format(bindings=BINDINGS)


@unittest.skipIf(TORCH_REASON is not None, TORCH_REASON or "")
class PluginTorchTests(unittest.TestCase):
    """PyTorch allocating through the example slab library."""

    def test_tensor_ops_through_the_plugin(self):
        r = run_python(_TENSOR_OP, GPUMEM_ALLOCATOR="plugin", GPUMEM_PLUGIN_LIBRARY=SLAB_LIB)
        self.assertTrue(r["config"].startswith("strategy=plugin "), r["config"])
        self.assertTrue(r["close"], "a @ b through the plug-in differs from the CPU")
        self.assertTrue(r["small_ok"])
        self.assertGreater(r["allocated"], 0)
        # The library's own view: 1 MiB slabs hold the small tensors, fewer upstream calls than tensors.
        self.assertGreaterEqual(r["reserved"], 1 << 20)
        self.assertLess(r["upstream_allocs"], r["live_allocs"])
        self.assertEqual(r["allocated_after"], 0)
        self.assertEqual(r["reserved_after_trim"], 0, "empty_cache() gave every empty slab back")

    def test_a_library_that_cannot_be_loaded_is_a_python_error_naming_it(self):
        r = run_python(_BAD_LIBRARY, GPUMEM_ALLOCATOR="plugin", GPUMEM_PLUGIN_LIBRARY="/nonexistent/libslab.so")
        self.assertIsNotNone(r["raised"])
        self.assertIn("/nonexistent/libslab.so", r["message"])
        self.assertIn("cannot be loaded", r["message"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
