"""The parts of bench/sleep's drop-in scripts that need no GPU: peer_tests.py's reading of a
test_examples.py (over a small one written here, in the peer's layout), its verdicts and its fresh
process per case with a time limit; the shim that makes `import torch_memory_saver` gpumem's saver;
rl_dropin.py's comparisons of tokens, losses and freed memory."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(BINDINGS))
SLEEP = os.path.join(REPO, "bench", "sleep")
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)
sys.path.insert(0, SLEEP)

from support import load_script  # noqa: E402

peer_tests = load_script("peer_tests", os.path.join(SLEEP, "peer_tests.py"))
rl_dropin = load_script("rl_dropin", os.path.join(SLEEP, "rl_dropin.py"))

TEST_EXAMPLES = '''
import pytest
from examples import fine, broken, slow, internal

_HOOK_MODES = ["preload", "torch"]


@pytest.mark.parametrize("hook_mode", _HOOK_MODES)
def test_fine(hook_mode):
    _test_core(fine.run, hook_mode=hook_mode)


def test_broken():
    with change_env("SOME_SWITCH", "1"):
        _test_core(broken.run, hook_mode="preload")


def test_slow():
    _test_core(slow.run, hook_mode="torch")


def test_internal():
    _test_core(internal.run, hook_mode="preload")


@_multi_device_only
def test_two():
    _test_core(fine.run, hook_mode="torch")


@_xpu_only
def test_xpu():
    _test_core(fine.run, hook_mode="torch")


def helper():
    pass
'''

EXAMPLES = {
    "fine": "import os\ndef run(hook_mode):\n    assert hook_mode in ('preload', 'torch')\n",
    "broken": "import os\ndef run(hook_mode):\n    raise ValueError('switch is ' + os.environ['SOME_SWITCH'])\n",
    "slow": "import time\ndef run(hook_mode):\n    time.sleep(30)\n",
    # a function of the example's module that it calls counts as the example's own
    "internal": "def run(hook_mode):\n    lib = saver._impl._binary_wrapper.cdll\n    helper(lib)\n\n"
    "def helper(lib):\n    lib.tms_pause(None, lib._binary_wrapper)\n\n"
    "def unused():\n    return saver._impl.tms_resume\n",
}


class PeerTestsTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        with open(os.path.join(cls.dir, "test_examples.py"), "w") as f:
            f.write(TEST_EXAMPLES)
        os.mkdir(os.path.join(cls.dir, "examples"))
        open(os.path.join(cls.dir, "examples", "__init__.py"), "w").close()
        for name, text in EXAMPLES.items():
            with open(os.path.join(cls.dir, "examples", f"{name}.py"), "w") as f:
                f.write(text)
        cls.cases = {c.name: c for c in peer_tests.read_cases(cls.dir)}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_cases_are_read_with_modes_and_environment(self):
        self.assertEqual(
            list(self.cases),
            ["test_fine[preload]", "test_fine[torch]", "test_broken[preload]", "test_slow[torch]", "test_internal[preload]", "test_two[torch]", "test_xpu[torch]"],
        )
        self.assertEqual(self.cases["test_broken[preload]"].env, {"SOME_SWITCH": "1"})
        self.assertEqual((self.cases["test_slow[torch]"].module, self.cases["test_slow[torch]"].function), ("slow", "run"))

    def test_what_does_not_apply(self):
        def why(name, devices=1):
            return peer_tests.not_applicable(self.cases[name], self.dir, devices)

        self.assertIsNone(why("test_fine[torch]"))
        self.assertIn("two CUDA devices; this host has 1", why("test_two[torch]"))
        self.assertIsNone(why("test_two[torch]", devices=2))
        self.assertEqual(why("test_xpu[torch]"), "Intel XPU only")
        self.assertEqual(
            why("test_internal[preload]"),
            "reaches into the peer's internals (its C library or its Python state) "
            "(_binary_wrapper in helper and run; _impl in run; cdll in run; tms_pause in helper)",
        )

    def test_a_fresh_process_per_case(self):
        status, reason, _, _ = peer_tests.run_case(self.cases["test_fine[preload]"], self.dir, 60)
        self.assertEqual((status, reason), ("pass", ""))
        status, reason, _, _ = peer_tests.run_case(self.cases["test_broken[preload]"], self.dir, 60)
        self.assertEqual((status, reason), ("fail", "ValueError: switch is 1"))  # the case's environment was set
        status, reason, _, _ = peer_tests.run_case(self.cases["test_slow[torch]"], self.dir, 2)
        self.assertEqual((status, reason), ("fail", "timed out after 2 s"))

    def test_the_list_runs_nothing(self):
        proc = subprocess.run([sys.executable, os.path.join(SLEEP, "peer_tests.py"), self.dir, "--list"], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("| test_internal[preload] ", proc.stdout)
        self.assertIn("to run", proc.stdout)
        self.assertIn("not applicable", proc.stdout)


class ShimTests(unittest.TestCase):
    def test_import_torch_memory_saver_is_gpumem_s_saver(self):
        code = (
            "import torch_memory_saver, gpumem_torch.saver as s\n"
            "print(torch_memory_saver.torch_memory_saver is s.memory_saver, torch_memory_saver.configure_subprocess is s.configure_subprocess)\n"
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([peer_tests.SHIM, BINDINGS]))
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(proc.stdout.split(), ["True", "True"], proc.stderr)


def run_of(impl, losses, tokens, free):
    """A run's rounds; `free`: per round, the free bytes once (generation, training)'s calls are made."""
    def phase(after):
        return {"free_before_bytes": after - (1 << 30), "free_after_bytes": after, "freed_bytes": 1 << 30, "seconds": 0.1}

    rounds = [
        {"round": i, "losses": losses[i], "tokens_sha256": tokens[i], "generation": phase(free[i][0]), "training": phase(free[i][1])}
        for i in range(len(losses))
    ]
    return {"impl": impl, "rounds": rounds}


class RlDropinTests(unittest.TestCase):
    GiB = 1 << 30

    def test_identical_runs(self):
        runs = [run_of(i, [[1.5, 1.25]], ["aa"], [(4 * self.GiB, 3 * self.GiB)]) for i in ("saver", "tagged_pool", "peer")]
        self.assertEqual(rl_dropin.differences(runs), [])
        self.assertEqual(rl_dropin.short_freed(runs), [])
        self.assertIn("| 0     | training", rl_dropin.table(runs))

    def test_differences_are_named(self):
        runs = [run_of("saver", [[1.5]], ["aa"], [(1, 1)]), run_of("peer", [[1.5000001]], ["ab"], [(1, 1)])]
        diffs = rl_dropin.differences(runs)
        self.assertEqual(len(diffs), 2)
        self.assertIn("losses saver [1.5], peer [1.5000001]", diffs[0])
        self.assertIn("tokens of saver and peer differ", diffs[1])

    def test_gpumem_leaving_less_free_than_the_peer(self):
        runs = [run_of("saver", [[1.0]], ["aa"], [(2 * self.GiB, 3 * self.GiB)]), run_of("peer", [[1.0]], ["aa"], [(3 * self.GiB, 3 * self.GiB)])]
        short = rl_dropin.short_freed(runs)
        self.assertEqual(short, ["round 0 generation: saver left 2.00 GiB free, the peer 3.00 GiB"])
        self.assertEqual(rl_dropin.short_freed(runs[:1]), [])  # no peer run: nothing to compare with


if __name__ == "__main__":
    unittest.main()
