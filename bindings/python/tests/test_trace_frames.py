"""Python frames as allocation tags: ``gpumem_torch.record(path, frames=True)``.

- FrameRuleTests: which frames are the user's (the snapshot reader's rule); only the standard library.
- FrameTraceTests need only the built library: no PyTorch, no GPU. The allocations are driven
  through the library's trace path by ``gpumem_tracesimulate`` (the path gpumem_malloc takes,
  the frame hook included, without allocating), from functions of this file, so the tags must
  name this file's lines.
- TorchFrameTests need PyTorch with a CUDA device (skipped otherwise, with the reason): a small
  PyTorch program of this file, recorded with frames, must be tagged with its own lines.

Each recording runs in a process of its own (the library's recorder is one per process).
"""

from support import torch_cuda_reason
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)

import gpumem_torch  # noqa: E402
from gpumem_torch._frames import is_internal_frame, simulate  # noqa: E402

LIB = gpumem_torch.library_path()
HAVE_LIB = os.path.exists(LIB)
LIB_REASON = f"libgpumem_torch.so not found at {LIB} (build native/ with CUDA or set GPUMEM_TORCH_LIB)"
TORCH_REASON = LIB_REASON if not HAVE_LIB else torch_cuda_reason()
if TORCH_REASON:
    print(f"[test_trace_frames] PyTorch frame tests skipped: {TORCH_REASON}", file=sys.stderr)
if not HAVE_LIB:
    print(f"[test_trace_frames] library tests skipped: {LIB_REASON}", file=sys.stderr)

THIS_FILE = os.path.abspath(__file__)


def read_jsonl(path):
    with open(path) as f:
        lines = f.read().splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:]]


def tag_names(header, events):
    """Each event's tag name, as `gpumem replay` reads it (a tag past the list is its last name)."""
    tags = header["tags"]
    return [tags[min(e["tag"], len(tags) - 1)] for e in events]


def line_of(function, text):
    """The absolute line number of the first line of `function` that contains `text`."""
    lines, first = inspect.getsourcelines(function)
    for k, line in enumerate(lines):
        if text in line:
            return first + k
    raise AssertionError(f"{text!r} not in {function.__name__}")


def run_in_child(call, timeout=180, **env):
    """Runs `call` (an expression over this module, imported as `frames`) in a fresh process and
    returns the JSON it prints last."""
    code = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {HERE!r})
        import test_trace_frames as frames
        print(json.dumps({call}))
        """
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    environ.update(GPUMEM_TORCH_LIB=LIB, PYTHONUNBUFFERED="1", **env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"child failed (exit {proc.returncode})\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- What the children run (module-level, so that their frames are this file's lines). ---


def small_allocations():
    simulate(3, 1000)  # tag: small_allocations


def large_allocations():
    simulate(2, 1 << 20)  # tag: large_allocations


def through_torch_frames():
    # A frame of a file under torch/ between the user's line and the library: skipped.
    scope = {"simulate": simulate}
    exec(compile("def op():\n    simulate(1, 4096)\n", "/opt/venv/lib/python3.11/site-packages/torch/fake_op.py", "exec"), scope)
    scope["op"]()  # tag: through_torch_frames


def program(path, frames=True):
    gpumem_torch.record(path, frames=frames)
    small_allocations()
    large_allocations()
    through_torch_frames()
    small_allocations()
    return gpumem_torch.stop()


def program_calls_hook(path, frames):
    """How many times the library called the frame hook while recording (`frames` on or off)."""
    from gpumem_torch import _frames

    calls = [0]
    tag = _frames._tagger.tag

    def counting(recording, frame):
        calls[0] += 1
        return tag(recording, frame)

    gpumem_torch.record(path + ".warm", frames=True)  # the hook is registered
    gpumem_torch.stop()
    _frames._tagger.tag = counting
    gpumem_torch.record(path, frames=frames)
    small_allocations()
    gpumem_torch.stop()
    return calls[0]


def many_sites(path, sites):
    """`sites` distinct allocating lines (generated code of a user file): more than the library keeps."""
    scope = {"simulate": simulate}
    source = "".join(f"def site{k}():\n    simulate(1, {k + 1})\n" for k in range(sites))
    exec(compile(source, "/home/user/generated_sites.py", "exec"), scope)
    gpumem_torch.record(path, frames=True)
    for k in range(sites):
        scope[f"site{k}"]()
    return gpumem_torch.stop()


def long_name(path):
    scope = {"simulate": simulate}
    exec(compile("def f():\n    simulate(1, 64)\n", "/home/" + "d" * 300 + "/deep.py", "exec"), scope)
    gpumem_torch.record(path, frames=True)
    scope["f"]()
    return gpumem_torch.stop()


def stale_recording(path):
    """A tag asked for with the number of a recording that ended is 0 (never a name of the next)."""
    import ctypes

    seen = []
    lib = gpumem_torch._library.load()
    lib.gpumem_trace_frame_tag.restype = ctypes.c_uint32
    lib.gpumem_trace_frame_tag.argtypes = [ctypes.c_uint64, ctypes.c_char_p]
    from gpumem_torch import _frames

    tag = _frames._tagger.tag

    def remember(recording, frame):
        seen.append(recording)
        return tag(recording, frame)

    _frames._tagger.tag = remember
    gpumem_torch.record(path, frames=True)
    small_allocations()
    gpumem_torch.stop()
    first = seen[-1]
    gpumem_torch.record(path, frames=True)
    large_allocations()
    out = {"old": lib.gpumem_trace_frame_tag(first, b"x.py:1:f"), "current": lib.gpumem_trace_frame_tag(seen[-1], b"x.py:1:f")}
    gpumem_torch.stop()
    return out


def torch_program(path):
    import torch

    gpumem_torch.enable("pool")
    gpumem_torch.record(path, frames=True)
    a = torch.empty(1 << 20, device="cuda")  # tag: torch a
    b = torch.nn.functional.relu(torch.ones(1 << 18, device="cuda"))  # tag: torch b
    c = torch.nn.Linear(256, 256, device="cuda")(torch.ones(64, 256, device="cuda"))  # tag: torch c
    torch.cuda.synchronize()
    del a, b, c
    return gpumem_torch.stop()


# --- The tests. ---


class FrameRuleTests(unittest.TestCase):
    """The snapshot reader's rule (packages/trace/src/snapshot/snapshot.ts, isInternalFrame)."""

    def test_internal_frames(self):
        for name in (
            "",
            "??",
            "<frozen runpy>",
            "<string>",
            "/usr/lib/python3/dist-packages/torch/nn/modules/module.py",
            "/venv/lib/python3.11/site-packages/torch/nn/functional.py",
            "torch/_tensor.py",
            "/usr/lib/python3.11/runpy.py",
            "C:\\Python311\\Lib\\python3.11\\threading.py",
            "/build/aten/src/ATen/native/cuda/Loss.cu",
            "/usr/lib/libc.so.6",
            os.path.join(os.path.dirname(gpumem_torch.__file__), "__init__.py"),
        ):
            with self.subTest(name=name):
                self.assertTrue(is_internal_frame(name))

    def test_user_frames(self):
        for name in (
            "/home/me/train.py",
            "train.py",
            "/venv/lib/python3.11/site-packages/transformers/models/gpt2/modeling_gpt2.py",
            "/usr/lib/python3/dist-packages/mylib/x.py",
            "/home/me/torchvision_tools/data.py",
            THIS_FILE,
        ):
            with self.subTest(name=name):
                self.assertFalse(is_internal_frame(name))

    def test_frames_argument_is_checked(self):
        for bad in (0, -1, 65, "yes", 2.0):
            with self.subTest(frames=bad), self.assertRaisesRegex(ValueError, "for frames but received"):
                gpumem_torch.record(os.path.join(tempfile.gettempdir(), "never.jsonl"), frames=bad)


@unittest.skipUnless(HAVE_LIB, LIB_REASON)
class FrameTraceTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "frames.jsonl")

    def tearDown(self):
        self.dir.cleanup()

    def expected(self, function, marker):
        return f"{THIS_FILE}:{line_of(function, marker)}:{function.__name__}"

    def test_allocations_are_tagged_with_their_user_line(self):
        result = run_in_child(f"frames.program({self.path!r})")
        header, events = read_jsonl(self.path)
        self.assertEqual(result["events"], len(events))
        self.assertEqual(header["eventCount"], len(events))
        small = self.expected(small_allocations, "# tag: small_allocations")
        large = self.expected(large_allocations, "# tag: large_allocations")
        torch_caller = self.expected(through_torch_frames, "# tag: through_torch_frames")
        # Tags in the order their frames first allocated; the one under torch/ names its caller.
        named = [t for t in header["tags"] if t != "other"]
        self.assertEqual(named, [small, large, torch_caller])
        self.assertEqual(header["tags"][0], "other")
        self.assertEqual(header["tags"][-1], "other")
        allocs = [(e["bytes"], name) for e, name in zip(events, tag_names(header, events)) if e["action"] == "alloc"]
        self.assertEqual(allocs, [(1000, small)] * 3 + [(1 << 20, large)] * 2 + [(4096, torch_caller)] + [(1000, small)] * 3)
        # Frees carry tag 0 (replay gives a free its allocation's tag).
        self.assertTrue(all(e["tag"] == 0 for e in events if e["action"] == "free"))

    def test_only_the_most_allocating_frames_are_named(self):
        run_in_child(f"frames.program({self.path!r}, frames=1)")
        header, events = read_jsonl(self.path)
        large = self.expected(large_allocations, "# tag: large_allocations")
        self.assertEqual(sorted(set(header["tags"])), sorted({"other", large}))
        names = tag_names(header, events)
        self.assertEqual({n for e, n in zip(events, names) if e["action"] == "alloc" and e["bytes"] == 1 << 20}, {large})
        self.assertEqual({n for e, n in zip(events, names) if e["action"] == "alloc" and e["bytes"] != 1 << 20}, {"other"})

    def test_no_python_call_without_frames(self):
        self.assertEqual(run_in_child(f"frames.program_calls_hook({self.path!r}, False)"), 0)
        header, events = read_jsonl(self.path)
        self.assertEqual(header["tags"], ["other"])
        self.assertTrue(all(e["tag"] == 0 for e in events))
        self.assertEqual(run_in_child(f"frames.program_calls_hook({self.path!r}, True)"), 3)

    def test_distinct_frames_are_capped(self):
        sites = 1100
        result = run_in_child(f"frames.many_sites({self.path!r}, {sites})")
        header, events = read_jsonl(self.path)
        self.assertEqual(result["events"], 2 * sites)
        allocs = [e for e in events if e["action"] == "alloc"]
        # 1023 frames get a tag of their own; the library keeps no more names than that.
        self.assertEqual(max(e["tag"] for e in allocs), 1023)
        self.assertEqual(sum(1 for e in allocs if e["tag"] == 0), sites - 1023)
        # The 12 that allocated the most among the tagged are named: the last sites (bytes k + 1).
        named = [t for t in header["tags"] if t != "other"]
        self.assertEqual(named, [f"/home/user/generated_sites.py:{2 * k + 2}:site{k}" for k in range(1023 - 12, 1023)])

    def test_long_names_are_cut_at_the_start(self):
        run_in_child(f"frames.long_name({self.path!r})")
        header, _ = read_jsonl(self.path)
        named = [t for t in header["tags"] if t != "other"]
        self.assertEqual(len(named), 1)
        self.assertEqual(len(named[0]), 200)
        self.assertTrue(named[0].startswith("...d"))
        self.assertTrue(named[0].endswith("/deep.py:2:f"))

    def test_a_tag_of_an_ended_recording_is_other(self):
        out = run_in_child(f"frames.stale_recording({self.path!r})")
        self.assertEqual(out["old"], 0)
        self.assertGreater(out["current"], 0)

    def test_csv_has_no_frames(self):
        proc = subprocess.run(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {BINDINGS!r}); import gpumem_torch; gpumem_torch.record({self.path + '.csv'!r}, frames=True)"],
            capture_output=True,
            text=True,
            env={**os.environ, "GPUMEM_TORCH_LIB": LIB},
            timeout=60,
        )
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("ValueError: gpumem: frames are recorded in gpumem's JSONL trace only", proc.stderr)
        # The library refuses them too, and more named frames than it keeps room for.
        import ctypes

        lib = ctypes.CDLL(LIB)
        lib.gpumem_trace_start_frames.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32]
        lib.gpumem_last_error.restype = ctypes.c_char_p
        self.assertEqual(lib.gpumem_trace_start_frames((self.path + ".csv").encode(), None, 12), 4)  # GPUMEM_TORCH_ERR_ARGUMENT
        self.assertIn(b"RMM's CSV has no tags", lib.gpumem_last_error())
        self.assertEqual(lib.gpumem_trace_start_frames(self.path.encode(), None, 65), 4)
        self.assertIn(b"more than 64", lib.gpumem_last_error())

    def test_a_trace_cut_short_reads_as_other(self):
        # The process dies before stop(): the trace stays in its temporary file beside the target
        # (never renamed over it), and its header keeps its first tag list, ["other"].
        proc = subprocess.run(
            [sys.executable, "-c", f"import os, sys; sys.path.insert(0, {HERE!r}); import test_trace_frames as f; import gpumem_torch; gpumem_torch.record({self.path!r}, frames=True); f.small_allocations(); os._exit(0)"],
            capture_output=True,
            text=True,
            env={**os.environ, "GPUMEM_TORCH_LIB": LIB},
            timeout=60,
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertFalse(os.path.exists(self.path))
        folder, name = os.path.split(self.path)
        partial = [n for n in os.listdir(folder) if n.startswith(f".{name}.") and n.endswith(".tmp")]
        self.assertEqual(len(partial), 1, os.listdir(folder))
        with open(os.path.join(folder, partial[0])) as f:
            first = f.readline()
        header = json.loads(first)
        self.assertEqual(header["tags"], ["other"])
        self.assertNotIn("eventCount", header)


@unittest.skipIf(TORCH_REASON, TORCH_REASON or "")
class TorchFrameTests(unittest.TestCase):
    def test_a_pytorch_program_is_tagged_with_its_own_lines(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "torch-frames.jsonl")
            result = run_in_child(f"frames.torch_program({path!r})")
            header, events = read_jsonl(path)
        self.assertEqual(result["events"], len(events))
        names = tag_names(header, events)
        allocated = {n for e, n in zip(events, names) if e["action"] == "alloc"}
        for marker in ("# tag: torch a", "# tag: torch b", "# tag: torch c"):
            with self.subTest(line=marker):
                self.assertIn(f"{THIS_FILE}:{line_of(torch_program, marker)}:torch_program", allocated)
        # Nothing is named after a frame of PyTorch or of the runtime.
        self.assertFalse([t for t in header["tags"] if t != "other" and is_internal_frame(t.rsplit(":", 2)[0])])


if __name__ == "__main__":
    unittest.main()
