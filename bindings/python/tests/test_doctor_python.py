"""python -m gpumem_torch doctor against gpumem doctor: the same JSON on the corpus's snapshots and
traces at capacities where the verdict is fits, fragmentation and real (skipped, saying why, where
Node.js or the built CLI is missing); the doctor runs with torch absent; bad input gets a clear
error and a non-zero exit, never a traceback. Needs libgpumem_torch.so (gpumem_replay), no GPU."""

import gzip
import json
import os
import pickle
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
CORPUS = ("seed_gcn.torch.pickle.gz", "seed_gcn.gpumem.jsonl.gz", "graphsage.torch.pickle.gz", "resnet50.gpumem.jsonl.gz")

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


def python_doctor(path, capacity, *flags, env=None):
    return run([sys.executable, "-m", "gpumem_torch", "doctor", path, "--capacity", str(capacity), "--json", *flags], env=env)


def node_doctor(path, capacity):
    return run([NODE, CLI, "doctor", path, "--capacity", str(capacity), "--json", "-"])


def verdict_of(proc):
    if proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


@unittest.skipIf(LIB_REASON or NODE_REASON, LIB_REASON or NODE_REASON)
class SameJsonAsGpumemDoctor(unittest.TestCase):
    maxDiff = None

    def capacities(self, path):
        """Capacities (MiB multiples) where the verdict is fits, fragmentation and real, from the doctor's own figures."""
        probe = verdict_of(python_doctor(path, 1 << 40))["verdict"]
        live, pytorch_need = probe["liveBytes"], probe["pytorch"]["needBytes"]
        out = {"fits": (pytorch_need + 64 * MIB) // MIB * MIB, "real": max(MIB, live * 3 // 4 // MIB * MIB)}
        middle = (live + pytorch_need) // 2 // MIB * MIB
        if live < middle < pytorch_need:
            out["fragmentation"] = middle
        return out

    def test_corpus(self):
        seen = set()
        for name in CORPUS:
            path = os.path.join("bench", "traces", name)
            for expected, capacity in self.capacities(os.path.join(REPO, path)).items():
                with self.subTest(file=name, capacity=capacity, expected=expected):
                    node = verdict_of(node_doctor(path, capacity))
                    python = verdict_of(python_doctor(path, capacity))
                    self.assertEqual(python, node)
                    self.assertEqual(python["verdict"]["kind"], expected)
                    seen.add(expected)
        self.assertEqual(seen, {"fits", "fragmentation", "real"})


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

    def test_snapshot_without_history_or_capacity(self):
        empty = self.write("empty.pickle", pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
        self.refused(empty, says="no allocation history")
        self.refused(self.write("list.pickle", pickle.dumps([1, 2], protocol=4)), says="segments only")
        bad = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": -5, "time_us": 1.0}]]}
        self.refused(self.write("neg.pickle", pickle.dumps(bad, protocol=4)), says="'size' must not be negative")
        ok = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 5}]]}
        path = self.write("nocap.pickle", pickle.dumps(ok, protocol=4))
        proc = run([sys.executable, "-m", "gpumem_torch", "doctor", path], env=python_env())
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
        for size, says in (("0", "more than 0 bytes"), ("16.5GiB", "Expected a size"), ("4GB", "did you mean '4GiB'"), ("99999999TiB", "Expected a size")):
            with self.subTest(size=size):
                proc = run([sys.executable, "-m", "gpumem_torch", "doctor", trace, "--capacity", size], env=python_env())
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(says, proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)

    def test_missing_file(self):
        self.refused(os.path.join(self.dir, "nope.pickle"), says="no such file")


if __name__ == "__main__":
    unittest.main()
