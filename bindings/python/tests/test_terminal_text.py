"""Text from a file reaches the terminal escaped (gpumem_torch._terminal): the same rule as gpumem's
CLI, code point for code point (checked against the built packages/allocator-core where Node.js is
there); ``python -m gpumem_torch doctor`` on a trace whose source and file name carry ESC sequences
prints them as visible escapes, and its JSON keeps the strings as they are."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from support import clean_env, library_reason

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PACKAGE_ROOT))
sys.path.insert(0, PACKAGE_ROOT)

from gpumem_torch._terminal import escape_terminal, escape_terminal_lines  # noqa: E402

NODE = shutil.which("node")
TS_TERMINAL = os.path.join(REPO, "packages", "allocator-core", "dist", "terminal.js")
# what a terminal would act on: C0 controls other than newline, DEL, C1 controls, bidi controls
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class EscapeTerminal(unittest.TestCase):
    def test_escape_sequences_controls_and_bidi_are_visible(self):
        self.assertEqual(escape_terminal("a\x1b]52;c;ZWNobw==\x07b"), "a\\x1b]52;c;ZWNobw==\\x07b")
        self.assertEqual(escape_terminal("line\nnext\tcell\rback\x00\x7f"), "line\\nnext\\tcell\\rback\\x00\\x7f")
        self.assertEqual(escape_terminal("\x9b31m"), "\\x9b31m")
        self.assertEqual(escape_terminal("file\u202egnp.exe\u2066"), "file\\u202egnp.exe\\u2066")

    def test_printable_text_and_newlines_between_lines_are_kept(self):
        for text in ("", "layer.0/weight", "Größe 2.00 MiB", "日本語 ✓", "back\\slash"):
            self.assertEqual(escape_terminal(text), text)
        self.assertEqual(escape_terminal_lines("one\x1b[2J\ntwo"), "one\\x1b[2J\ntwo")

    @unittest.skipIf(NODE is None or not os.path.exists(TS_TERMINAL), "Node.js or the built packages/allocator-core (npm run build) is missing")
    def test_same_as_the_cli_for_every_code_point_to_u3000(self):
        text = "".join(chr(c) for c in range(0x3000) if not 0xD800 <= c <= 0xDFFF)
        script = (
            f"import {{ escapeTerminal }} from {json.dumps('file://' + TS_TERMINAL)};"
            "let s = ''; process.stdin.on('data', (d) => (s += d)); process.stdin.on('end', () => process.stdout.write(escapeTerminal(s)));"
        )
        node = subprocess.run([NODE, "--input-type=module", "-e", script], input=text.encode("utf-8"), capture_output=True, timeout=120)
        self.assertEqual(node.returncode, 0, node.stderr.decode())
        self.assertEqual(escape_terminal(text), node.stdout.decode("utf-8"))


LIB_REASON = library_reason()


@unittest.skipIf(LIB_REASON, LIB_REASON)
class DoctorText(unittest.TestCase):
    def test_doctor_escapes_its_text_and_keeps_its_json(self):
        folder = tempfile.mkdtemp(prefix="gpumem-terminal-")
        self.addCleanup(shutil.rmtree, folder, True)
        path = os.path.join(folder, "trace\x1b[2J.jsonl")
        header = {"format": "gpumem-trace", "version": 1, "source": "evil\x1b]52;c;cm0=\x07", "eventCount": 2}
        events = [
            {"timeNs": 0, "action": "alloc", "ptr": 4096, "bytes": 4 << 20, "stream": 0, "tag": 0},
            {"timeNs": 1000, "action": "free", "ptr": 4096, "bytes": 4 << 20, "stream": 0, "tag": 0},
        ]
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(x) + "\n" for x in [header, *events]))
        env = clean_env()
        env["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        argv = [sys.executable, "-m", "gpumem_torch", "doctor", path, "--capacity", "1GiB"]
        text = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIsNone(RAW.search(text.stdout), text.stdout)
        self.assertIn("trace\\x1b[2J.jsonl", text.stdout)
        self.assertIn("evil\\x1b]52;c;cm0=\\x07", text.stdout)
        js = subprocess.run([*argv, "--json", "-"], capture_output=True, text=True, env=env, timeout=600)
        self.assertEqual(js.returncode, 0, js.stderr)
        self.assertIsNone(RAW.search(js.stderr), js.stderr)
        self.assertEqual(json.loads(js.stdout)["file"], path)


if __name__ == "__main__":
    unittest.main()
