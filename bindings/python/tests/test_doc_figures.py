"""The figures README.md and docs/torch.md quote for PyTorch users come from one source each, and agree
with it: the live runs (bench/torch-live's JSON lines, summarised by its summary.py as bench/RESULTS.md
is) for what PyTorch and gpumem reserved running a program, and bench/RESULTS.md's replay table for
what a recorded program needs replayed. No GPU, no PyTorch: files only.
"""

import importlib.util
import os
import re
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
LIVE = os.path.join(REPO, "bench", "torch-live", "results", "2026-11-25-h100x2-torch-live.jsonl.gz")
GIB = 1 << 30
MIB = 1 << 20
# docs/torch.md's table of the default, column by column.
COLUMNS = ("torch-default", "torch-expandable", "gpumem-pool", "gpumem-expandable")
GPT2_FINETUNE = re.compile(r"GPT-2 fine-tun|gpt2_finetune")
FIGURE = re.compile(r"(\d+\.\d\d) GiB")


def _summary():
    spec = importlib.util.spec_from_file_location("torch_live_summary", os.path.join(REPO, "bench", "torch-live", "summary.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(*path):
    with open(os.path.join(REPO, *path), encoding="utf-8") as f:
        return f.read()


def _shown(nbytes):
    """A peak as the docs write it: GiB to two decimals from 1 GiB, else whole MiB."""
    return f"{nbytes / GIB:.2f} GiB" if nbytes >= GIB else f"{round(nbytes / MIB)} MiB"


def _live():
    """{program: {config: peak reserved bytes (median of the runs)}} from the live runs' JSON lines."""
    summary = _summary()
    return {
        g["program"]: {name: c["peak_reserved_bytes"] for name, c in g["configs"].items() if "peak_reserved_bytes" in c}
        for g in summary.summarise(summary.read_lines([LIVE]))
    }


def _replayed_gpt2():
    """The GiB figures of bench/RESULTS.md's replay row for GPT-2 fine-tuning."""
    row = next(line for line in _read("bench", "RESULTS.md").splitlines() if line.startswith("| gpt2_finetune (variable lengths) |"))
    return set(FIGURE.findall(row))


def _passages(text):
    """Table rows one by one, prose paragraph by paragraph: the unit a figure is read in."""
    for paragraph in re.split(r"\n\s*\n", text):
        lines = paragraph.splitlines()
        if lines and all(line.lstrip().startswith("|") for line in lines):
            yield from lines
        else:
            yield " ".join(lines)


class DocFigures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.live = _live()

    def test_the_default_table_is_the_live_runs_medians(self):
        doc = _read("docs", "torch.md")
        section = doc[doc.index("### The default: `expandable`"):]
        section = section[: section.index("\n#", 1)]
        rows = [line for line in section.splitlines() if re.match(r"\| `\w+` +\|", line)]
        self.assertEqual(sorted(re.match(r"\| `(\w+)`", r).group(1) for r in rows), sorted(self.live))
        for row in rows:
            cells = [c.strip().strip("*") for c in row.strip("|").split("|")]
            program = cells[0].strip("`")
            expected = [_shown(self.live[program][config]) for config in COLUMNS]
            self.assertEqual(cells[1:], expected, program)

    def test_every_gpt2_finetune_figure_in_the_readme_and_torch_md_is_the_live_runs_or_the_replay_tables(self):
        live = {_shown(b)[: -len(" GiB")] for b in self.live["gpt2_finetune"].values()}
        replayed = _replayed_gpt2()
        self.assertIn("15.70", replayed)  # PyTorch's reserved bytes in the recorded run
        checked = 0
        for name in ("README.md", os.path.join("docs", "torch.md")):
            for passage in _passages(_read(name)):
                if not GPT2_FINETUNE.search(passage):
                    continue
                figures = FIGURE.findall(passage)
                # a replay is the recorded program's allocations: its figures are the replay table's
                source = replayed if re.search(r"replayed|recorded run", passage) else live
                for figure in figures:
                    self.assertIn(figure, source, f"{name}: {figure} GiB in: {passage[:300]}")
                    checked += 1
        self.assertGreaterEqual(checked, 10)

    def test_the_first_screens_quote_the_same_three_figures(self):
        gpt2 = self.live["gpt2_finetune"]
        three = [_shown(gpt2[c]) for c in ("gpumem-expandable", "torch-default", "torch-expandable")]
        self.assertEqual(three, ["14.30 GiB", "15.69 GiB", "14.33 GiB"])
        readme = _read("README.md")
        first = readme[: readme.index("## Quick start")]
        steps = _read("docs", "torch.md")
        steps = steps[steps.index("## In three steps"): steps.index("## Install")]
        for text in (first, steps):
            for figure in three:
                self.assertIn(figure, text)
            self.assertIn("gpumem_torch-0.1.0-py3-none-manylinux_2_28_x86_64.whl", text)
            self.assertIn("python -m gpumem_torch doctor", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)
