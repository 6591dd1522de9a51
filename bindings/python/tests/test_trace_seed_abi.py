"""Allocation traces (GPUMEM_TRACE, gpumem_torch.record/stop) and the seed's uvm_allocator.so
names in libgpumem_torch.so (part of ``npm run test:torch``).

- SeedAbiTests and TraceTests need only the built library: no PyTorch, no GPU. Without a GPU the
  library cannot allocate, so the traces there are made of frees of pointers it never gave out
  (recorded like any free, then counted as bad frees), which exercises the whole path: the
  recorder, the buffers, the file, the exit flush.
- TorchTraceTests need PyTorch with a CUDA device; otherwise they are skipped with the reason.

Each case that sets the environment or must survive a failure runs in a process of its own.
"""

from support import torch_cuda_reason
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(BINDINGS))
sys.path.insert(0, BINDINGS)

import gpumem_torch  # noqa: E402

LIB = gpumem_torch.library_path()
HAVE_LIB = os.path.exists(LIB)
LIB_REASON = f"libgpumem_torch.so not found at {LIB} (build native/ with CUDA or set GPUMEM_TORCH_LIB)"

# The seed library's C interface: name -> (restype, argtypes).
SEED_ABI = {
    "uvm_malloc": (ctypes.c_void_p, [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]),
    "uvm_free": (None, [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]),
    "uvm_get_allocated_bytes": (ctypes.c_size_t, []),
    "uvm_get_peak_allocated_bytes": (ctypes.c_size_t, []),
    "uvm_get_num_allocs": (ctypes.c_uint64, []),
    "uvm_get_num_frees": (ctypes.c_uint64, []),
    "uvm_reset_peak_stats": (None, []),
}

GPUMEM_VARS = ("GPUMEM_ALLOCATOR", "GPUMEM_OOM", "GPUMEM_TRACE", "GPUMEM_POOL_MAX_RESERVED", "GPUMEM_UVM_LIMIT")


def _torch_cuda_reason():
    if not HAVE_LIB:
        return LIB_REASON
    return torch_cuda_reason()


TORCH_REASON = _torch_cuda_reason()
if TORCH_REASON:
    print(f"[test_trace_seed_abi] PyTorch trace tests skipped: {TORCH_REASON}", file=sys.stderr)
if not HAVE_LIB:
    print(f"[test_trace_seed_abi] library tests skipped: {LIB_REASON}", file=sys.stderr)


def _env(**overrides):
    env = {k: v for k, v in os.environ.items() if k not in GPUMEM_VARS}
    env["GPUMEM_TORCH_LIB"] = LIB
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


# Prelude of the scripts run in subprocesses: the library with the seed's names typed.
_PRELUDE = textwrap.dedent(
    """
    import ctypes, json, os, sys
    sys.path.insert(0, {bindings!r})
    import gpumem_torch
    lib = ctypes.CDLL({lib!r})
    for name, (res, args) in {abi!r}.items():
        f = getattr(lib, name)
        f.restype = getattr(ctypes, res) if res else None
        f.argtypes = [getattr(ctypes, a) for a in args]
    lib.gpumem_last_error.restype = ctypes.c_char_p
    def bogus_frees(n, base=0x7f0000000000):
        for i in range(n):
            lib.uvm_free(base + i * 512, 512 + i, 0, 0x1234 if i % 2 else None)
    """
)


def _abi_names():
    def name(t):
        return None if t is None else t.__name__

    return {k: (name(r), [name(a) for a in args]) for k, (r, args) in SEED_ABI.items()}


def run_script(body, timeout=120, **env):
    code = _PRELUDE.format(bindings=BINDINGS, lib=LIB, abi=_abi_names()) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(**env), timeout=timeout)


def last_json(proc):
    if proc.returncode != 0:
        raise AssertionError(f"script failed (exit {proc.returncode})\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def read_jsonl(path):
    with open(path) as f:
        lines = f.read().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def device_present():
    """Whether the library can allocate on device 0 (checked in a subprocess, NULL on failure)."""
    proc = run_script(
        """
        p = lib.uvm_malloc(1024, 0, None)
        ok = bool(p)
        if ok:
            lib.uvm_free(p, 1024, 0, None)
        print(json.dumps({"ok": ok, "error": lib.gpumem_last_error().decode()}))
        """,
        GPUMEM_OOM="null",
    )
    r = last_json(proc)
    return r["ok"], r["error"]


@unittest.skipUnless(HAVE_LIB, LIB_REASON)
class SeedAbiTests(unittest.TestCase):
    """uvm_malloc & co. resolve by name, as the seed's script loads them, without PyTorch or a GPU."""

    def check_symbols(self, path):
        lib = ctypes.CDLL(path)
        for name, (restype, argtypes) in SEED_ABI.items():
            with self.subTest(symbol=name):
                f = getattr(lib, name)  # AttributeError if the name is not exported
                f.restype, f.argtypes = restype, argtypes
                self.assertIsNotNone(ctypes.cast(f, ctypes.c_void_p).value)

    def test_symbols_resolve(self):
        self.check_symbols(LIB)

    def test_copied_as_uvm_allocator_so(self):
        with tempfile.TemporaryDirectory() as d:
            copy = os.path.join(d, "uvm_allocator.so")
            shutil.copy(LIB, copy)
            self.check_symbols(copy)

    def test_calls_without_a_device_fail_cleanly(self):
        # GPUMEM_OOM=null: a C caller gets NULL rather than the C++ exception PyTorch gets.
        present, _ = device_present()
        if present:
            self.skipTest("a CUDA device is present: this case is about a machine without one")
        proc = run_script(
            """
            out = {}
            out["ptr"] = lib.uvm_malloc(1024, 0, None)
            out["error"] = lib.gpumem_last_error().decode()
            lib.uvm_free(None, 0, 0, None)
            lib.uvm_free(0x7f0000001000, 64, 0, None)       # not gpumem's: counted, left alone
            lib.uvm_reset_peak_stats()
            out["after_reset_error"] = lib.gpumem_last_error().decode()
            for name in ("uvm_get_allocated_bytes", "uvm_get_peak_allocated_bytes", "uvm_get_num_allocs", "uvm_get_num_frees"):
                out[name] = getattr(lib, name)()
            out["raw"] = gpumem_torch.raw_stats(0)
            print(json.dumps(out))
            """,
            GPUMEM_OOM="null",
        )
        r = last_json(proc)
        self.assertIsNone(r["ptr"])
        self.assertIn("device 0", r["error"])
        self.assertEqual(r["uvm_get_allocated_bytes"], r["raw"]["allocated_bytes"])
        self.assertEqual(r["uvm_get_peak_allocated_bytes"], r["raw"]["peak_allocated_bytes"])
        self.assertEqual(r["uvm_get_num_allocs"], r["raw"]["alloc_count"])
        self.assertEqual(r["uvm_get_num_frees"], r["raw"]["free_count"])
        self.assertEqual(r["uvm_get_allocated_bytes"], 0)
        self.assertEqual(r["raw"]["error_count"], 1)
        self.assertEqual(r["raw"]["bad_free_count"], 1)
        # The getters and the reset leave the caller's last error alone.
        self.assertTrue(r["after_reset_error"].startswith("gpumem: free of"), r["after_reset_error"])

    def test_same_statistics_as_gpumem_stats_on_a_device(self):
        present, why = device_present()
        if not present:
            self.skipTest(f"no CUDA device for the library: {why}")
        r = last_json(
            run_script(
                """
                ptrs = [lib.uvm_malloc(1 << 20, 0, None) for _ in range(3)]
                lib.uvm_free(ptrs.pop(), 1 << 20, 0, None)
                out = {k: getattr(lib, k)() for k in ("uvm_get_allocated_bytes", "uvm_get_peak_allocated_bytes", "uvm_get_num_allocs", "uvm_get_num_frees")}
                out["raw"] = gpumem_torch.raw_stats(0)
                lib.uvm_reset_peak_stats()
                out["peak_after_reset"] = lib.uvm_get_peak_allocated_bytes()
                for p in ptrs:
                    lib.uvm_free(p, 1 << 20, 0, None)
                print(json.dumps(out))
                """
            )
        )
        self.assertEqual(r["uvm_get_allocated_bytes"], 2 << 20)
        self.assertEqual(r["uvm_get_peak_allocated_bytes"], 3 << 20)
        self.assertEqual(r["uvm_get_num_allocs"], 3)
        self.assertEqual(r["uvm_get_num_frees"], 1)
        self.assertEqual(r["raw"]["allocated_bytes"], 2 << 20)
        self.assertEqual(r["peak_after_reset"], 2 << 20)


@unittest.skipUnless(HAVE_LIB, LIB_REASON)
class TraceTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpumem-trace-test-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_record_and_stop_jsonl(self):
        out = self.path("t.jsonl")
        r = last_json(
            run_script(
                f"""
                path = gpumem_torch.record({out!r}, workload={{"model": "none"}})
                active = gpumem_torch.is_recording()
                bogus_frees(150000)     # several buffers' worth
                print(json.dumps({{"path": path, "active": active, "stop": gpumem_torch.stop(), "after": gpumem_torch.is_recording()}}))
                """
            )
        )
        self.assertEqual(r["path"], out)
        self.assertTrue(r["active"])
        self.assertFalse(r["after"])
        self.assertEqual(r["stop"], {"path": out, "events": 150000, "format": "jsonl"})
        header, events = read_jsonl(out)
        self.assertEqual(header["format"], "gpumem-trace")
        self.assertEqual(header["version"], 1)
        self.assertEqual(header["source"], "libgpumem_torch")
        self.assertEqual(header["allocator"], "expandable")
        self.assertEqual(header["tags"], ["other"])
        self.assertEqual(header["workload"], {"model": "none"})
        self.assertEqual(header["eventCount"], 150000)
        self.assertEqual(len(events), 150000)
        times = [e["timeNs"] for e in events]
        self.assertEqual(times[0], 0)
        self.assertEqual(times, sorted(times))
        for i in (0, 1, 77777, 149999):
            e = events[i]
            self.assertEqual(e["action"], "free")
            self.assertEqual(e["ptr"], 0x7F0000000000 + i * 512)
            self.assertEqual(e["bytes"], 512 + i)
            self.assertEqual(e["stream"], 0x1234 if i % 2 else 0)
            self.assertEqual(e["device"], 0)
            self.assertEqual(e["tag"], 0)

    def test_record_and_stop_rmm_csv(self):
        out = self.path("t.csv")
        r = last_json(run_script(f"gpumem_torch.record({out!r}); bogus_frees(70000); print(json.dumps(gpumem_torch.stop()))"))
        self.assertEqual(r["events"], 70000)
        self.assertEqual(r["format"], "rmm-csv")
        with open(out) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "Thread,Time,Action,Pointer,Size,Stream")
        self.assertEqual(len(lines), 70001)
        for i in (0, 1, 69999):
            thread, time, action, ptr, size, stream = lines[i + 1].split(",")
            self.assertTrue(thread.isdigit())
            self.assertRegex(time, r"^\d\d:\d\d:\d\d\.\d{6}$")
            self.assertEqual(action, "free")
            self.assertEqual(ptr, hex(0x7F0000000000 + i * 512))
            self.assertEqual(size, str(512 + i))
            self.assertEqual(stream, "0x1234" if i % 2 else "0x0")

    def test_env_trace_is_completed_at_exit(self):
        out = self.path("env.jsonl")
        proc = run_script("bogus_frees(100001); print(json.dumps({'active': gpumem_torch.is_recording()}))", GPUMEM_TRACE=out)
        self.assertTrue(last_json(proc)["active"])
        header, events = read_jsonl(out)
        self.assertEqual(header["eventCount"], 100001)
        self.assertEqual(len(events), 100001)
        self.assertEqual(header["workload"]["trigger"], "GPUMEM_TRACE")
        self.assertTrue(header["workload"]["config"].startswith("strategy=expandable "))

    def test_env_trace_can_be_stopped_and_then_record_again(self):
        out, again = self.path("env.csv"), self.path("again.jsonl")
        r = last_json(
            run_script(
                f"""
                bogus_frees(10)
                first = gpumem_torch.stop()
                gpumem_torch.record({again!r}); bogus_frees(3); second = gpumem_torch.stop()
                print(json.dumps([first, second]))
                """,
                GPUMEM_TRACE=out,
            )
        )
        self.assertEqual(r[0], {"path": out, "events": 10, "format": "rmm-csv"})
        self.assertEqual(r[1]["events"], 3)

    def test_bad_trace_path_is_reported_and_the_program_goes_on(self):
        bad = os.path.join(self.dir, "no", "such", "dir", "t.jsonl")
        proc = run_script(
            "bogus_frees(5); print(json.dumps({'active': gpumem_torch.is_recording(), 'bad_frees': gpumem_torch.raw_stats(0)['bad_free_count']}))",
            GPUMEM_TRACE=bad,
        )
        r = last_json(proc)
        self.assertFalse(r["active"])
        self.assertEqual(r["bad_frees"], 5)
        self.assertIn(bad, proc.stderr)
        self.assertIn("No such file or directory", proc.stderr)
        self.assertIn("GPUMEM_TRACE", proc.stderr)
        self.assertEqual(proc.stderr.count("gpumem:"), 1, proc.stderr)

    def test_errors(self):
        out = self.path("t.jsonl")
        r = last_json(
            run_script(
                f"""
                errors = []
                for call in (lambda: gpumem_torch.stop(),
                             lambda: gpumem_torch.record({os.path.join(self.dir, "missing", "x.jsonl")!r})):
                    try:
                        call()
                    except (RuntimeError, gpumem_torch.OutputFileError) as e:
                        errors.append(str(e))
                gpumem_torch.record({out!r})
                try:
                    gpumem_torch.record({out + ".2"!r})
                except RuntimeError as e:
                    errors.append(str(e))
                gpumem_torch.stop()
                print(json.dumps(errors))
                """
            )
        )
        self.assertEqual(len(r), 3, r)
        self.assertIn("no trace is being recorded", r[0])
        self.assertRegex(r[1], r"cannot write '.*missing/x\.jsonl': the folder .*missing does not exist")
        self.assertIn("already recording", r[2])

    def test_forked_child_does_not_write(self):
        out = self.path("fork.jsonl")
        r = last_json(
            run_script(
                f"""
                gpumem_torch.record({out!r})
                bogus_frees(3)
                pid = os.fork()
                if pid == 0:
                    bogus_frees(1000, base=0x7e0000000000)
                    sys.exit(0)                          # runs the library's exit flush in the child
                _, status = os.waitpid(pid, 0)
                bogus_frees(2)
                print(json.dumps({{"child_status": status, "stop": gpumem_torch.stop()}}))
                """
            )
        )
        self.assertEqual(r["child_status"], 0)
        self.assertEqual(r["stop"]["events"], 5)
        header, events = read_jsonl(out)
        self.assertEqual(header["eventCount"], 5)
        self.assertEqual(len(events), 5)

    def test_project_reader_reads_both_formats(self):
        node = shutil.which("node")
        reader = os.path.join(REPO, "packages", "trace", "dist", "index.js")
        if node is None or not os.path.exists(reader):
            self.skipTest("node or the built @gpumem/trace (packages/trace/dist) is missing")
        paths = [self.path("r.jsonl"), self.path("r.csv")]
        for p in paths:
            last_json(run_script(f"gpumem_torch.record({p!r}); bogus_frees(1000); print(json.dumps(gpumem_torch.stop()))"))
        script = (
            f"import {{ readTrace }} from {json.dumps('file://' + reader)};"
            f"for (const f of {json.dumps(paths)}) {{ const t = await readTrace(f);"
            "console.log(JSON.stringify({format: t.format, events: t.events.length, first: t.events[0]})); }"
        )
        proc = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        results = [json.loads(line) for line in proc.stdout.splitlines()]
        self.assertEqual([r["format"] for r in results], ["jsonl", "rmm-csv"])
        for r in results:
            self.assertEqual(r["events"], 1000)
            self.assertEqual(r["first"]["action"], "free")
            self.assertEqual(r["first"]["ptr"], 0x7F0000000000)


_TORCH_TRACE = """
import json, os, sys
sys.path.insert(0, {bindings!r})
import gpumem_torch
gpumem_torch.enable("pool")
import torch
x = torch.randn(1024, 1024, device="cuda")
y = (x @ x).relu()
del x, y
torch.cuda.synchronize()
oom = None
try:
    torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
except RuntimeError as e:
    oom = str(e)
torch._C._cuda_clearCublasWorkspaces()
s = gpumem_torch.raw_stats()
print(json.dumps({{"oom": oom, "alloc_count": s["alloc_count"], "free_count": s["free_count"], "oom_count": s["oom_count"], "allocated": s["allocated_bytes"]}}))
"""

_TORCH_SEED = """
import ctypes, json, sys
import torch
alloc = torch.cuda.memory.CUDAPluggableAllocator({lib!r}, "uvm_malloc", "uvm_free")
torch.cuda.memory.change_current_allocator(alloc)
lib = ctypes.CDLL({lib!r})
lib.uvm_get_allocated_bytes.restype = ctypes.c_size_t
lib.uvm_get_num_allocs.restype = ctypes.c_uint64
x = torch.ones(1000, 1000, device="cuda")
live = lib.uvm_get_allocated_bytes()
total = float(x.sum())
del x
print(json.dumps({{"live": live, "after": lib.uvm_get_allocated_bytes(), "allocs": lib.uvm_get_num_allocs(), "sum": total}}))
"""


@unittest.skipIf(TORCH_REASON is not None, TORCH_REASON or "")
class TorchTraceTests(unittest.TestCase):
    def test_trace_matches_the_statistics(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "torch.jsonl")
            proc = subprocess.run(
                [sys.executable, "-c", _TORCH_TRACE.format(bindings=BINDINGS)],
                capture_output=True, text=True, env=_env(GPUMEM_TRACE=out), timeout=600,
            )
            r = last_json(proc)
            self.assertIn("out of memory", r["oom"])
            header, events = read_jsonl(out)
            self.assertEqual(header["eventCount"], len(events))
            actions = [e["action"] for e in events]
            self.assertEqual(actions.count("alloc"), r["alloc_count"])
            self.assertEqual(actions.count("oom"), r["oom_count"])
            self.assertEqual(r["oom_count"], 1)
            # Frees during the interpreter's shutdown are recorded too.
            self.assertGreaterEqual(actions.count("free"), r["free_count"])
            oom = events[actions.index("oom")]
            self.assertEqual(oom["bytes"], 1 << 50)
            self.assertEqual(oom["ptr"], 0)

    def test_seed_names_as_pytorch_allocator(self):
        with tempfile.TemporaryDirectory() as d:
            copy = os.path.join(d, "uvm_allocator.so")
            shutil.copy(LIB, copy)
            proc = subprocess.run(
                [sys.executable, "-c", _TORCH_SEED.format(lib=copy)], capture_output=True, text=True, env=_env(), timeout=600
            )
            r = last_json(proc)
            self.assertEqual(r["sum"], 1e6)
            self.assertGreaterEqual(r["live"], 4_000_000)
            self.assertLess(r["after"], r["live"])
            self.assertGreaterEqual(r["allocs"], 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
