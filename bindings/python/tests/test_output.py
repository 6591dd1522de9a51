"""The files gpumem_torch writes (gpumem_torch/_output.py, and the trace recorder of
libgpumem_torch.so behind ``record``): regular files only, replaced whole (a new inode, the old
mode), devices, FIFOs, sockets and folders refused untouched, a NUL byte in a name refused, every
error an OutputFileError naming the file, nothing left behind on failure.

- OutputFileTests and RecordPathTests: only the standard library (no library, no PyTorch).
- RecordFileTests need the built library (skipped otherwise, with the reason); each recording
  runs in a process of its own (the library's recorder is one per process)."""

import os
import socket
import stat
import subprocess
import sys
import tempfile
import unittest

from support import library_reason

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import gpumem_torch  # noqa: E402
from gpumem_torch._output import OutputFile, OutputFileError, same_file, write_output  # noqa: E402

IS_ROOT = os.geteuid() == 0
LIB_REASON = library_reason()
if LIB_REASON:
    print(f"[test_output] recording tests skipped: {LIB_REASON}", file=sys.stderr)


def leftovers(folder):
    return [n for n in os.listdir(folder) if n.endswith(".tmp")]


class OutputFileTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gpumem-py-output-")
        self.addCleanup(self.dir.cleanup)
        self.folder = self.dir.name

    def path(self, name):
        return os.path.join(self.folder, name)

    def test_new_file_mode_and_replaced_file_keeps_its_mode(self):
        out = self.path("result.json")
        write_output(out, '{"a":1}\n')
        umask = os.umask(0)
        os.umask(umask)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o666 & ~umask)
        os.chmod(out, 0o600)
        write_output(out, b'{"a":2}\n')
        with open(out, encoding="utf-8") as f:
            self.assertEqual(f.read(), '{"a":2}\n')
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o600)
        self.assertEqual(leftovers(self.folder), [])

    def test_hard_link_gets_a_new_inode_and_symbolic_link_is_followed(self):
        precious, hard = self.path("precious"), self.path("hl.json")
        with open(precious, "w", encoding="utf-8") as f:
            f.write("precious\n")
        os.link(precious, hard)
        write_output(hard, "new\n")
        with open(precious, encoding="utf-8") as f:
            self.assertEqual(f.read(), "precious\n")
        self.assertFalse(same_file(precious, hard))
        link = self.path("link.json")
        os.symlink(precious, link)
        write_output(link, "through the link\n")
        self.assertTrue(os.path.islink(link))
        with open(precious, encoding="utf-8") as f:
            self.assertEqual(f.read(), "through the link\n")
        os.symlink(self.path("missing/target.json"), self.path("dangling.json"))
        with self.assertRaisesRegex(OutputFileError, r"dangling\.json.*symbolic link to .*target\.json, which does not exist"):
            write_output(self.path("dangling.json"), "x")

    def test_folder_fifo_socket_and_null_device(self):
        os.mkdir(self.path("folder"))
        with self.assertRaisesRegex(OutputFileError, "is a folder"):
            write_output(self.path("folder"), "x")
        os.mkfifo(self.path("pipe"))
        with self.assertRaisesRegex(OutputFileError, r"is a named pipe \(FIFO\)"):
            write_output(self.path("pipe"), "x")
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.path("pipe")).st_mode))
        server = socket.socket(socket.AF_UNIX)
        self.addCleanup(server.close)
        server.bind(self.path("sock"))
        with self.assertRaisesRegex(OutputFileError, "is a socket") as caught:
            write_output(self.path("sock"), "x")
        self.assertEqual(caught.exception.code, "GPUMEM_OUTPUT_FILE")
        self.assertEqual(caught.exception.path, self.path("sock"))
        write_output("/dev/null", "anything")
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))
        self.assertEqual(leftovers(self.folder), [])

    @unittest.skipUnless(IS_ROOT, "making a device node needs root")
    def test_character_device_is_refused_and_stays_a_device(self):
        device = self.path("f")
        os.mknod(device, 0o644 | stat.S_IFCHR, os.makedev(1, 7))
        with self.assertRaisesRegex(OutputFileError, r"'.*/f': is a character device"):
            write_output(device, "x")
        self.assertTrue(stat.S_ISCHR(os.lstat(device).st_mode))

    def test_nul_byte_missing_folder_and_parent_file(self):
        with self.assertRaisesRegex(OutputFileError, "contains a NUL byte") as caught:
            write_output(self.path("trace\x00.evil.jsonl"), "x")
        self.assertIsInstance(caught.exception, ValueError)
        self.assertFalse(os.path.exists(self.path("trace")))
        with self.assertRaisesRegex(OutputFileError, r"the folder .*missing does not exist"):
            write_output(self.path("missing/out.json"), "x")
        with open(self.path("plain.txt"), "w", encoding="utf-8") as f:
            f.write("x")
        with self.assertRaisesRegex(OutputFileError, r"a parent of .*plain\.txt is a file, not a folder"):
            write_output(self.path("plain.txt/out.json"), "x")

    def test_an_exception_inside_discards_and_keeps_the_previous_file(self):
        out = self.path("stream.jsonl")
        with open(out, "w", encoding="utf-8") as f:
            f.write("previous\n")
        with self.assertRaises(KeyError):
            with OutputFile(out) as w:
                w.write("partial\n")
                raise KeyError("interrupted")
        with open(out, encoding="utf-8") as f:
            self.assertEqual(f.read(), "previous\n")
        self.assertEqual(leftovers(self.folder), [])

    def test_a_write_past_the_file_size_limit_names_the_file_and_keeps_it(self):
        out = self.path("report.json")
        with open(out, "w", encoding="utf-8") as f:
            f.write("previous\n")
        # ulimit -f 64: at most 64 KiB a file; SIGXFSZ ignored, so the write fails with EFBIG
        script = ("import signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); sys.path.insert(0, sys.argv[2]);"
                  "from gpumem_torch._output import write_output; write_output(sys.argv[1], 'x' * (1 << 20))")  # fmt: skip
        r = subprocess.run(["bash", "-c", 'ulimit -f 64; exec "$0" -c "$1" "$2" "$3"', sys.executable, script, out, os.path.dirname(HERE)],
                           capture_output=True, text=True)  # fmt: skip
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr, r"OutputFileError: gpumem: cannot write '.*report\.json': writing failed \(EFBIG: .*\); its previous content is kept")
        with open(out, encoding="utf-8") as f:
            self.assertEqual(f.read(), "previous\n")
        self.assertEqual(leftovers(self.folder), [])


class RecordPathTests(unittest.TestCase):
    """record() refuses a bad name before it asks the library."""

    def test_nul_byte_in_the_trace_path(self):
        with tempfile.TemporaryDirectory() as folder:
            with self.assertRaisesRegex(gpumem_torch.OutputFileError, "contains a NUL byte"):
                gpumem_torch.record(os.path.join(folder, "trace\x00.evil.jsonl"))
            self.assertEqual(os.listdir(folder), [])

    def test_fifo_and_folder_as_the_trace(self):
        with tempfile.TemporaryDirectory() as folder:
            fifo = os.path.join(folder, "pipe.jsonl")
            os.mkfifo(fifo)
            with self.assertRaisesRegex(gpumem_torch.OutputFileError, r"is a named pipe \(FIFO\)"):
                gpumem_torch.record(fifo)
            with self.assertRaisesRegex(gpumem_torch.OutputFileError, "is a folder"):
                gpumem_torch.record(folder)


class DoctorOutputTests(unittest.TestCase):
    """python -m gpumem_torch doctor checks '--json' before any work, as gpumem doctor does."""

    def doctor(self, *args):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        return subprocess.run([sys.executable, "-m", "gpumem_torch", "doctor", *args], capture_output=True, text=True, env=env)

    def test_json_that_is_the_trace_or_a_fifo_is_refused(self):
        with tempfile.TemporaryDirectory() as folder:
            trace = os.path.join(folder, "t.jsonl")
            with open(trace, "w", encoding="utf-8") as f:
                f.write('{"format":"gpumem-trace","version":1}\n')
            alias = os.path.join(folder, "alias.json")
            os.link(trace, alias)
            r = self.doctor(trace, "--json", alias)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("is the trace FILE: writing it would overwrite the input", r.stderr)
            fifo = os.path.join(folder, "pipe")
            os.mkfifo(fifo)
            r = self.doctor(trace, "--json", fifo)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("is a named pipe (FIFO)", r.stderr)
            with open(trace, encoding="utf-8") as f:
                self.assertEqual(f.read(), '{"format":"gpumem-trace","version":1}\n')


RECORD = """
import os, sys
sys.path.insert(0, sys.argv[2])
import gpumem_torch
gpumem_torch.record(sys.argv[1])
print(gpumem_torch.stop()["events"])
"""


@unittest.skipIf(LIB_REASON, LIB_REASON or "")
class RecordFileTests(unittest.TestCase):
    def test_record_through_a_hard_link_writes_a_new_file_with_the_old_mode(self):
        with tempfile.TemporaryDirectory() as folder:
            precious, link = os.path.join(folder, "precious"), os.path.join(folder, "hl.jsonl")
            with open(precious, "w", encoding="utf-8") as f:
                f.write("precious\n")
            os.link(precious, link)
            os.chmod(link, 0o600)
            r = subprocess.run([sys.executable, "-c", RECORD, link, os.path.dirname(HERE)], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(precious, encoding="utf-8") as f:
                self.assertEqual(f.read(), "precious\n")
            with open(link, encoding="utf-8") as f:
                self.assertIn('"format":"gpumem-trace"', f.readline())
            self.assertEqual(stat.S_IMODE(os.stat(link).st_mode), 0o600)
            self.assertEqual(os.stat(link).st_nlink, 1)
            self.assertEqual(leftovers(folder), [])


if __name__ == "__main__":
    unittest.main()
