"""python -m gpumem_torch doctor against gpumem doctor: the same JSON on the corpus's snapshots and
traces at capacities where the verdict is fits, fragmentation and real (skipped, saying why, where
Node.js or the built CLI is missing); the doctor runs with torch absent; bad input gets a clear
error and a non-zero exit, never a traceback. Needs libgpumem_torch.so (gpumem_replay), no GPU."""

import gzip
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

from support import clean_env, library_reason

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PACKAGE_ROOT))
TRACES = os.path.join(REPO, "bench", "traces")
CLI = os.path.join(REPO, "packages", "cli", "dist", "cli.js")
MIB = 1 << 20
# Small enough for a test, each with a fragmentation gap: snapshots and the same runs' gpumem traces.
# GPUMEM_DOCTOR_FULL_CORPUS=1 takes every file of bench/traces (minutes).
CORPUS = ("seed_gcn.torch.pickle.gz", "seed_gcn.gpumem.jsonl.gz", "graphsage.torch.pickle.gz", "resnet50.gpumem.jsonl.gz")
if os.environ.get("GPUMEM_DOCTOR_FULL_CORPUS") == "1":
    CORPUS = tuple(sorted(n for n in os.listdir(TRACES) if n.endswith((".pickle.gz", ".jsonl.gz"))))

def synthetic_snapshot(seed=7):
    """A snapshot with what the corpus lacks: user frames (tags), two streams, deferred frees, a
    failed request with device_free, allocations from before the history, expandable_segments."""
    rng = random.Random(seed)
    MIB = 1 << 20
    frames = {name: [{"filename": "/usr/lib/python3.11/site-packages/torch/nn/functional.py", "line": 10, "name": "linear"},
                     {"filename": "/home/u/train.py", "line": line, "name": name}]
              for name, line in (("forward", 40), ("backward", 55), ("optimizer_step", 70), ("load_weights", 12))}
    entries, t, addr = [], 1.7e15, 0x7f0000000000
    def add(action, a, size, stream=0, **kw):
        nonlocal t
        t += rng.randint(1, 50)
        entries.append({"action": action, "addr": a, "size": size, "stream": stream, "time_us": t, **kw})
    entries.append({"action": "segment_alloc", "addr": addr, "size": 512 * MIB, "stream": 0, "time_us": t})
    for i in range(8):  # weights, standing
        addr += 64 * MIB; add("alloc", addr, 32 * MIB, frames=frames["load_weights"])
    for step in range(6):
        step_live = []
        for i in range(rng.randint(10, 20)):
            addr += 64 * MIB
            size = rng.choice([1, 3, 8, 24, 100]) * MIB + rng.randint(0, 4096)
            stream = 0 if i % 3 else 7
            add("alloc", addr, size, stream, frames=frames["forward"])
            step_live.append((addr, size, stream))
        if step == 4:
            add("oom", 0, 900 * MIB, 0, device_free=123 * MIB)
        for a, size, stream in reversed(step_live):
            if rng.random() < 0.3:
                add("free_requested", a, size, stream)
                add("alloc", addr + 1, 4096, 0, frames=frames["backward"]); addr += 64 * MIB
                add("free_completed", addr - 64 * MIB + 1, 4096, 0)
            else:
                add("free_requested", a, size, stream)
            add("free_completed", a, size, stream)
        addr += 64 * MIB; add("alloc", addr, 2 * MIB, 0, frames=frames["optimizer_step"])
    add("free_completed", 0x100000, 16 * MIB, 0)  # allocated before the history began
    segments = [{"device": 0, "address": 1, "total_size": 2048 * MIB, "blocks": [
        {"size": 300 * MIB, "requested_size": 300 * MIB, "state": "active_allocated"}]}]
    return {"segments": segments, "device_traces": [entries], "allocator_settings": {"expandable_segments": True, "garbage_collection_threshold": 0.0}}


LIB_REASON = library_reason()
NODE = shutil.which("node")
NODE_REASON = (
    "node is not on PATH" if NODE is None else None if os.path.exists(CLI) else f"the CLI is not built ({CLI} missing: npm run build)"
)
if LIB_REASON:
    print(f"[test_doctor_python] skipped: {LIB_REASON}", file=sys.stderr)
elif NODE_REASON:
    print(f"[test_doctor_python] equality with gpumem doctor skipped: {NODE_REASON}", file=sys.stderr)


def run(argv, env=None, cwd=REPO):
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env or python_env(), timeout=600)


def python_env(**extra):
    env = clean_env(**extra)
    env["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def capacity_flags(capacity):
    return [] if capacity is None else ["--capacity", str(capacity)]


def python_doctor(path, capacity, *flags, env=None):
    return run([sys.executable, "-m", "gpumem_torch", "doctor", path, *capacity_flags(capacity), "--json", *flags], env=env)


def node_doctor(path, capacity, *flags):
    return run([NODE, CLI, "doctor", path, *capacity_flags(capacity), "--json", "-", *flags])


def verdict_of(proc):
    if proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


@unittest.skipIf(LIB_REASON or NODE_REASON, LIB_REASON or NODE_REASON)
class SameJsonAsGpumemDoctor(unittest.TestCase):
    maxDiff = None

    def capacities(self, path):
        """Capacities (MiB multiples) where the verdict is fits, fragmentation, real and too-close, from
        the doctor's own figures at a capacity past everything: the live bytes' band and PyTorch's."""
        probe = verdict_of(python_doctor(path, 1 << 40))["verdict"]
        live_band, pytorch_band = probe["decision"]["band"] if probe["decision"]["by"] == "live" else None, probe["pytorch"]["band"]
        live_high = probe["liveBytes"] + probe["uncertainty"]["outside"]["highBytes"] if live_band is None else live_band["highBytes"]
        mib = lambda b: b // MIB * MIB  # noqa: E731
        out = {
            "fits": mib(pytorch_band["highBytes"] + 64 * MIB),
            "real": max(MIB, mib(probe["liveBytes"] * 3 // 4)),
            "too-close": mib((pytorch_band["lowBytes"] + pytorch_band["highBytes"]) // 2),
        }
        middle = mib((live_high + pytorch_band["lowBytes"]) // 2)
        if live_high < middle < pytorch_band["lowBytes"]:
            out["fragmentation"] = middle
        return out

    def test_corpus(self):
        seen = set()
        for name in CORPUS:
            path = os.path.join("bench", "traces", name)
            for expected, capacity in self.capacities(os.path.join(REPO, path)).items():
                with self.subTest(file=name, capacity=capacity, expected=expected):
                    node_proc, python_proc = node_doctor(path, capacity), python_doctor(path, capacity)
                    node, python = verdict_of(node_proc), verdict_of(python_proc)
                    self.assertEqual(python, node)
                    self.assertEqual(python_proc.stdout, node_proc.stdout)  # byte for byte: key order, indentation
                    self.assertEqual(python["verdict"]["kind"], expected)
                    seen.add(expected)
        self.assertEqual(seen, {"fits", "fragmentation", "real", "too-close"})

    def test_frames_streams_failed_requests_history_before(self):
        # what the corpus lacks: tags from user frames (the reductions by tag, idle tags), two
        # streams, a failed request, bytes allocated before the history, expandable_segments
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "synthetic.pickle")
            with open(path, "wb") as f:
                pickle.dump(synthetic_snapshot(), f, protocol=4)
            kinds = set()
            # None: the capacity the snapshot recorded at its OOM entry
            cases = (("400MiB", ()), ("1GiB", ()), ("1GiB", ("--skip-failed-requests",)), ("3GiB", ()), (None, ()),
                     ("3GiB", ("--outside", "100MiB..300MiB", "--model-error", "0.01")), (None, ("--outside", "64MiB")))  # fmt: skip
            for capacity, flags in cases:
                with self.subTest(capacity=capacity, flags=flags):
                    node_proc, python_proc = node_doctor(path, capacity, *flags), python_doctor(path, capacity, *flags)
                    node, python = verdict_of(node_proc), verdict_of(python_proc)
                    self.assertEqual(python, node)
                    self.assertEqual(python_proc.stdout, node_proc.stdout)
                    self.assertEqual(python["capacitySource"] == "--capacity", capacity is not None)
                    v = python["verdict"]
                    kinds.add(v["kind"])
                    self.assertGreater(v["heldBeforeTraceBytes"], 0)
                    self.assertGreater(len(v["peak"]["byTag"]), 2)
                    if v["kind"] == "real":
                        self.assertEqual([r["kind"] for r in v["reductions"]][:2], ["tiered-by-tag", "tiered-by-stream"])
            self.assertLessEqual({"real", "fits"}, kinds)  # and too-close, where the default band straddles the capacity


@unittest.skipIf(LIB_REASON, LIB_REASON)
class WithoutTorch(unittest.TestCase):
    def test_doctor_runs_with_torch_blocked(self):
        # torch made unimportable, as on a machine without it: the doctor reads, replays and judges
        code = (
            "import sys; sys.modules['torch'] = None\n"
            "import runpy; sys.argv = ['gpumem_torch', 'doctor', sys.argv[1], '--capacity', '1GiB', '--json']\n"
            "runpy.run_module('gpumem_torch', run_name='__main__')\n"
        )
        proc = run([sys.executable, "-c", code, os.path.join(TRACES, "seed_gcn.torch.pickle.gz")])
        body = verdict_of(proc)
        self.assertEqual(body["verdict"]["kind"], "real")
        self.assertEqual(body["capacitySource"], "--capacity")
        self.assertNotIn("Traceback", proc.stderr)

    def test_api_without_torch(self):
        code = (
            "import sys, json; sys.modules['torch'] = None\n"
            "import gpumem_torch\n"
            f"r = gpumem_torch.doctor({os.path.join(TRACES, 'seed_gcn.gpumem.jsonl.gz')!r}, capacity='64GiB')\n"
            "print(json.dumps([r['verdict']['kind'], r['verdict']['capacityBytes'], r['trace']['format']]))\n"
        )
        proc = run([sys.executable, "-c", code])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(json.loads(proc.stdout.splitlines()[-1]), ["fits", 64 << 30, "jsonl"])


@unittest.skipIf(LIB_REASON, LIB_REASON)
class ReplayAbi(unittest.TestCase):
    """gpumem_replay (gpumem_torch.h) through _replay.Program: the chain built from a name and text options."""

    def program(self, sizes):
        from gpumem_torch import _replay, _trace

        events = [(i, "alloc", 4096 * (i + 1), size, 0, 0, None) for i, size in enumerate(sizes)]
        c = _trace.compile_trace(events, None)
        return _replay, _replay.Program(c)

    def test_limit_counts_out_of_memory(self):
        replay, program = self.program([3 * MIB, 3 * MIB, 3 * MIB])
        host = replay.StrategySpec("host", "host", {})
        self.assertEqual(program.replay(host, 9 * MIB).ooms, 0)
        result = program.replay(host, 8 * MIB)
        self.assertEqual((result.ooms, result.allocs), (1, 2))
        pool = replay.StrategySpec("pool", "pool", {"upstream": "host"})
        self.assertEqual(program.replay(pool, 1 << 30).ooms, 0)
        self.assertGreaterEqual(program.replay(pool, 1 << 30).peak_reserved_bytes, 9 * MIB)

    def test_address_only_and_first_failure(self):
        replay, program = self.program([3 * MIB, 3 * MIB, 3 * MIB])
        pool = replay.StrategySpec("pool", "pool", {"upstream": "host"})
        # 64 GiB of addresses backed by nothing: nothing is taken from this machine
        self.assertEqual(program.replay(pool, 1 << 36, address_only=True).ooms, 0)
        self.assertEqual(program.replay(pool, 5 * MIB, address_only=True).ooms, 2)
        self.assertEqual(program.replay(pool, 5 * MIB, address_only=True, stop_at_first_oom=True).ooms, 1)
        with self.assertRaisesRegex(replay.ReplayError, "addressOnly"):
            program.replay(replay.StrategySpec("host", "host", {}), MIB, address_only=True)

    def test_refusals_name_what_is_wrong(self):
        replay, program = self.program([MIB])
        with self.assertRaisesRegex(replay.ReplayError, "nope"):
            program.replay(replay.StrategySpec("nope", "nope", {}), MIB)
        with self.assertRaisesRegex(replay.ReplayError, "Unknown option 'colour'"):
            program.replay(replay.StrategySpec("pool", "pool", {"colour": "blue"}), MIB)
        with self.assertRaisesRegex(replay.ReplayError, "upstream"):
            program.replay(replay.StrategySpec("pool", "pool", {"upstream": "moon"}), MIB)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


@unittest.skipIf(LIB_REASON, LIB_REASON)
class BadInput(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def refused(self, path, *flags, exit_code=1, says=""):
        proc = python_doctor(path, "1GiB", *flags)
        self.assertEqual(proc.returncode, exit_code, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertIn(says, proc.stderr)
        self.assertEqual(proc.stdout, "")
        return proc.stderr

    def test_hostile_pickle_loads_nothing(self):
        path = self.write("evil.pickle", pickle.dumps(_Evil(), protocol=4))
        err = self.refused(path, says="refused: the pickle names")
        self.assertNotIn("pwned", err)

    def test_truncated_and_garbage(self):
        whole = pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 2}]]}, protocol=4)
        self.refused(self.write("cut.pickle", whole[: len(whole) // 2]), says="not a readable pickle")
        self.refused(self.write("cut.pickle.gz", gzip.compress(whole)[:-12]), says="gzip")
        self.refused(self.write("junk.bin", b"\x00\x01binary"), says="neither a PyTorch snapshot")
        # zstd: read where this Python has a decompressor, else said so; a corrupt stream either way
        self.refused(self.write("snap.pickle.zst", b"\x28\xb5\x2f\xfd" + b"\x00" * 32), says="zstd")
        self.refused(self.write("snap.pickle.xz", b"\xfd7zXZ\x00" + b"\x00" * 32), says="xz -d")
        deep = b'{"format":"gpumem-trace","version":1}\n' + b"[" * 100000 + b"]" * 100000 + b"\n"
        self.refused(self.write("deep.jsonl", deep), says="deep.jsonl:2: not a JSON event object")

    def test_snapshot_without_history_or_capacity(self):
        empty = self.write("empty.pickle", pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
        self.refused(empty, says="no allocation history")
        self.refused(self.write("list.pickle", pickle.dumps([1, 2], protocol=4)), says="segments only")
        bad = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": -5, "time_us": 1.0}]]}
        self.refused(self.write("neg.pickle", pickle.dumps(bad, protocol=4)), says="'size' must not be negative")
        huge = 10**5000  # an int no str() of Python 3.11 writes by default, nor a float holds
        for field, says in (("size", "'size' is huge"), ("time_us", "beyond a float's range"), ("addr", "'addr' is huge")):
            entry = {"action": "alloc", "addr": 1, "size": 5, "time_us": 1.0, field: huge}
            self.refused(self.write(f"huge-{field}.pickle", pickle.dumps({"device_traces": [[entry]]}, protocol=4)), says=says)
        ok = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 5}]]}
        path = self.write("nocap.pickle", pickle.dumps(ok, protocol=4))
        # no CUDA device either (on a GPU host the device's total would be the capacity)
        proc = run([sys.executable, "-m", "gpumem_torch", "doctor", path], env=python_env(CUDA_VISIBLE_DEVICES=""))
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("no capacity to judge against", proc.stderr)

    def test_shared_list_is_not_walked_many_times(self):
        # one segment, its blocks a list of a thousand, referenced 100000 times: 10^8 visits from a
        # file of a few hundred KiB, refused by the item budget (the file's size) instead of walked
        segment = {"device": 0, "total_size": 1, "blocks": [{"state": "inactive", "size": 1}] * 1000}
        snapshot = {"device_traces": [[{"action": "alloc", "addr": 1, "size": 1}]], "segments": [segment] * 100000}
        self.refused(self.write("shared.pickle", pickle.dumps(snapshot, protocol=4)), says="more items")

    def test_bad_sizes(self):
        trace = os.path.join(TRACES, "seed_gcn.torch.pickle.gz")
        for size, says in (("0", "more than 0 bytes"), ("16.5", "Expected a size"), ("4GB", "did you mean '4GiB'"), ("99999999TiB", "Expected a size"),
                           ("1 GiB ", "Expected a size")):  # fmt: skip
            with self.subTest(size=size):
                proc = run([sys.executable, "-m", "gpumem_torch", "doctor", trace, "--capacity", size], env=python_env())
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(says, proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)

    def test_fractional_capacity(self):
        # 16.5GiB: rounded down to whole bytes, as gpumem's parsers read it
        body = verdict_of(python_doctor(os.path.join(TRACES, "seed_gcn.torch.pickle.gz"), "16.5GiB"))
        self.assertEqual(body["verdict"]["capacityBytes"], 33 * (1 << 29))

    def test_missing_file(self):
        self.refused(os.path.join(self.dir, "nope.pickle"), says="no such file")


if __name__ == "__main__":
    unittest.main()
