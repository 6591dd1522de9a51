"""Tests of bench/doctor/agree.py (gpumem doctor against real runs) that need neither PyTorch nor a
GPU: the arguments, the doctor's JSON as the script reads it, and the capacities chosen per case.
The real runs need a GPU: `bash bench/gpu/suite.sh doctor` runs them."""

import contextlib
import os
import unittest

from support import load_script

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
GIB = 1 << 30




agree = load_script("doctor_agree", os.path.join(REPO, "bench", "doctor", "agree.py"))


def doctor_json(kind, capacity, live, pytorch_need, pytorch_fits, best, best_need, best_fits):
    return {
        "kind": kind, "capacityBytes": capacity, "liveBytes": live,
        "pytorch": {"label": "pool", "needBytes": pytorch_need, "fits": pytorch_fits},
        "best": {"label": best, "needBytes": best_need, "marginBytes": capacity - best_need, "fits": best_fits},
        "strategies": [{"label": best, "fits": best_fits, "needBytes": best_need, "ranked": True},
                       {"label": "pool", "fits": pytorch_fits, "needBytes": pytorch_need, "ranked": True}],
    }


class ArgumentTests(unittest.TestCase):
    def test_defaults_and_refusals(self):
        args = agree.parse_args([])
        self.assertEqual(args.program_list, ["gpt2_finetune", "gpt2_generate"])
        self.assertEqual(args.case_list, ["fits", "fragmentation", "real"])
        self.assertIsNone(args.steps)
        for bad in (["--programs", "nope"], ["--cases", "fits,maybe"], ["--steps", "0"]):
            with self.assertRaises(SystemExit), open(os.devnull, "w") as devnull:
                with contextlib.redirect_stderr(devnull):
                    agree.parse_args(bad)


class VerdictTests(unittest.TestCase):
    def test_reads_the_verdict_and_the_named_strategy(self):
        v = agree.verdict_of(doctor_json("fragmentation", 15 * GIB, 14 * GIB, 16 * GIB, False, "expandable:reserveBytes=1TiB",
                                         14.2 * GIB, True))
        self.assertEqual(v["kind"], "fragmentation")
        self.assertFalse(v["pytorch_fits"])
        self.assertTrue(v["best_fits"])
        self.assertEqual(agree.strategy_name(v["best"]), "expandable")

    def test_capacities_per_case(self):
        base = agree.verdict_of(doctor_json("fits", 80 * GIB, 14 * GIB, 15.4 * GIB, True, "expandable", 14.3 * GIB, True))
        caps = agree.capacities(base, ["fits", "fragmentation", "real"], 0.04)
        self.assertEqual(caps["fits"], int(15.4 * GIB * 1.05))
        self.assertEqual(caps["fragmentation"], int((15.4 + 14.3) / 2 * GIB))
        self.assertEqual(caps["real"], int(14 * GIB * 0.9))
        # fits > fragmentation > live > real: each case's capacity is where its verdict must fall
        self.assertGreater(caps["fits"], caps["fragmentation"])
        self.assertGreater(caps["fragmentation"], base["best_need"])
        self.assertLess(caps["real"], base["live"])

    def test_no_fragmentation_case_when_the_needs_are_close(self):
        base = agree.verdict_of(doctor_json("fits", 80 * GIB, 14 * GIB, 14.5 * GIB, True, "expandable", 14.3 * GIB, True))
        self.assertNotIn("fragmentation", agree.capacities(base, ["fragmentation"], 0.04))


if __name__ == "__main__":
    unittest.main()
