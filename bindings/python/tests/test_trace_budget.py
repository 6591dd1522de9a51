"""The Python doctor's reader keeps the TypeScript reader's budget and frames (packages/trace/src/
formats/budget.ts, io.ts): at most GPUMEM_TRACE_MAX_EVENTS events (2^22 by default), a snapshot
history no denser than one entry per 16 bytes of pickle (one entry referenced by DUP or BINGET many
times), every gzip member and zstd frame read and bytes after the last refused, and an input that
is a regular file or ``-``. Only the standard library; no PyTorch, no library, no GPU."""

import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)

from gpumem_torch import _budget, _snapshot, _tracefile  # noqa: E402

HEADER = '{"format":"gpumem-trace","version":1,"source":"test"}\n'


def event(i):
    return '{"timeNs":%d,"action":"alloc","ptr":%d,"bytes":64,"stream":0,"tag":0}\n' % (i, 4096 * (i + 1))


def short_str(s):
    return bytes([0x8C, len(s)]) + s.encode()


def dup_bomb(count):
    """``{'segments': [], 'device_traces': [[entry] + count DUPs of it]}``, protocol 4."""
    entry = (
        b"}("
        + short_str("action") + short_str("alloc")
        + short_str("addr") + b"J" + struct.pack("<i", 4096)
        + short_str("size") + b"K\x40"
        + b"u"
    )
    return (
        b"\x80\x04}" + short_str("segments") + b"]s" + short_str("device_traces") + b"]](" + entry + b"2" * count + b"eas."
    )


def zstd_decompressor_reason():
    try:
        from compression import zstd  # noqa: F401
        return None
    except ImportError:
        pass
    try:
        import zstandard  # noqa: F401
        return None
    except ImportError:
        return "this Python has no zstd decompressor (compression.zstd from 3.14, or zstandard)"


class BudgetTests(unittest.TestCase):
    def test_a_dup_bomb_past_the_default_budget_is_the_budget_error(self):
        with self.assertRaises(_budget.TraceBudgetError) as caught:
            _snapshot.parse_snapshot(dup_bomb(_budget.DEFAULT_MAX_TRACE_EVENTS + 10), "dups.pickle")
        e = caught.exception
        self.assertIsInstance(e, _tracefile.TraceFormatError)
        self.assertEqual(e.code, "ERR_TRACE_BUDGET")
        self.assertEqual(e.limit, _budget.DEFAULT_MAX_TRACE_EVENTS)
        self.assertRegex(str(e), r"^dups\.pickle: device_traces\[0\]: more than 4194304 events, past the readers' budget on decoded work; ")
        self.assertIn("GPUMEM_TRACE_MAX_EVENTS=16777216", str(e))

    def test_a_history_denser_than_pytorch_writes_is_refused_in_the_typescript_readers_words(self):
        with self.assertRaises(_tracefile.TraceFormatError) as caught:
            _snapshot.parse_snapshot(dup_bomb(100_000), "dups.pickle")
        self.assertRegex(
            str(caught.exception),
            r"^dups\.pickle: device_traces\[0\]: 100001 entries in \d+ bytes of pickle, more than one per 16 bytes: "
            r"entries referenced many times over \(PyTorch writes each entry, some 50 bytes, once\), which this reader refuses$",
        )

    def test_a_jsonl_trace_stops_at_the_event_past_the_limit(self):
        text = HEADER + "".join(event(i) for i in range(12))
        self.assertEqual(len(_tracefile.read_jsonl(text, "ok.jsonl", max_events=12).events), 12)
        with self.assertRaises(_budget.TraceBudgetError) as caught:
            _tracefile.read_jsonl(text, "big.jsonl", max_events=10)
        self.assertRegex(str(caught.exception), r"^big\.jsonl:12: more than 10 events, past the readers' budget on decoded work; .*=40 ")

    def test_the_doctor_names_the_budget_and_the_setting_raises_it(self):
        d = tempfile.mkdtemp(prefix="gpumem-budget-")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        path = os.path.join(d, "three.jsonl")
        with open(path, "w") as f:
            f.write(HEADER + event(0) + event(1) + event(2))
        doctor = subprocess.run(
            [sys.executable, "-m", "gpumem_torch", "doctor", path, "--capacity", "1GiB"],
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": BINDINGS, "GPUMEM_TRACE_MAX_EVENTS": "2"},
            timeout=60,
        )
        self.assertNotEqual(doctor.returncode, 0)
        self.assertIn(f"gpumem_torch doctor: trace past the readers' budget: {path}:4: more than 2 events", doctor.stderr.decode())

    def test_the_limit_comes_from_gpumem_trace_max_events(self):
        self.assertEqual(_budget.max_trace_events(None, {}), _budget.DEFAULT_MAX_TRACE_EVENTS)
        self.assertEqual(_budget.max_trace_events(None, {"GPUMEM_TRACE_MAX_EVENTS": "5"}), 5)
        self.assertEqual(_budget.max_trace_events(7, {"GPUMEM_TRACE_MAX_EVENTS": "5"}), 7)
        for bad in ("0", "-1", "1e9", " 5", "0x10", "many", "99999999999999999999"):
            with self.assertRaisesRegex(ValueError, "^GPUMEM_TRACE_MAX_EVENTS must be a positive integer"):
                _budget.max_trace_events(None, {"GPUMEM_TRACE_MAX_EVENTS": bad})


class CompressionTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpumem-budget-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def written(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_every_gzip_member_is_read(self):
        first = gzip.compress((HEADER + "".join(event(i) for i in range(399))).encode(), mtime=0)
        second = gzip.compress("".join(event(i) for i in range(399, 798)).encode(), mtime=0)
        self.assertEqual(len(_tracefile.read_trace(self.written("two.jsonl.gz", first + second)).events), 798)

    def test_bytes_after_the_last_gzip_member_are_refused_and_zeros_are_not(self):
        member = gzip.compress((HEADER + event(0)).encode(), mtime=0)
        with self.assertRaisesRegex(_tracefile.TraceFormatError, r"gzip: 8 byte\(s\) after the member that starts at byte 0, at byte \d+, are not a gzip member"):
            _tracefile.read_trace(self.written("garbage.jsonl.gz", member + b"garbage!"))
        self.assertEqual(len(_tracefile.read_trace(self.written("padded.jsonl.gz", member + bytes(10))).events), 1)

    @unittest.skipIf(zstd_decompressor_reason() is not None, zstd_decompressor_reason() or "")
    @unittest.skipIf(shutil.which("zstd") is None, "the zstd command is not installed (it writes the frames)")
    def test_every_zstd_frame_is_read_skippable_frames_skipped_trailing_bytes_refused(self):
        def zstd(text):
            return subprocess.run(["zstd", "-q", "-c"], input=text.encode(), stdout=subprocess.PIPE, check=True).stdout

        skippable = struct.pack("<II", 0x184D2A50, 4) + b"meta"
        data = skippable + zstd(HEADER + "".join(event(i) for i in range(10))) + zstd("".join(event(i) for i in range(10, 15)))
        self.assertEqual(len(_tracefile.read_trace(self.written("frames.jsonl.zst", data)).events), 15)
        with self.assertRaisesRegex(_tracefile.TraceFormatError, r"after the last zstd frame"):
            _tracefile.read_trace(self.written("garbage.jsonl.zst", data + b"garbage!"))

    def test_a_file_of_a_skippable_frame_first_is_zstd(self):
        data = struct.pack("<II", 0x184D2A5F, 2) + b"ab"
        # told as zstd: decompressed (or refused as having no frame), never read as text
        with self.assertRaisesRegex(_tracefile.TraceFormatError, r"zstd"):
            _tracefile.read_trace(self.written("skip-only.zst", data))


class InputTests(unittest.TestCase):
    @unittest.skipIf(not hasattr(os, "mkfifo"), "no FIFOs here")
    def test_a_fifo_or_a_device_is_refused_without_blocking(self):
        d = tempfile.mkdtemp(prefix="gpumem-budget-")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        fifo = os.path.join(d, "trace.fifo")
        os.mkfifo(fifo)
        with self.assertRaisesRegex(_tracefile.TraceFileError, r"is a named pipe \(FIFO\), not a regular file"):
            _tracefile.read_trace(fifo)
        doctor = subprocess.run(
            [sys.executable, "-m", "gpumem_torch", "doctor", fifo],
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": BINDINGS},
            timeout=60,
        )
        self.assertNotEqual(doctor.returncode, 0)
        self.assertIn(f"gpumem_torch doctor: cannot read '{fifo}': {fifo} is a named pipe (FIFO), not a regular file", doctor.stderr.decode())
        if os.path.exists("/dev/zero"):
            with self.assertRaisesRegex(_tracefile.TraceFormatError, r"^/dev/zero is a character device, not a regular file"):
                _tracefile.read_trace("/dev/zero")

    def test_dash_is_standard_input(self):
        code = "import sys; sys.path.insert(0, %r)\nfrom gpumem_torch import _tracefile\nprint(len(_tracefile.read_trace('-').events))" % BINDINGS
        out = subprocess.run(
            [sys.executable, "-c", code], input=gzip.compress((HEADER + event(0) + event(1)).encode()), stdout=subprocess.PIPE, check=True
        ).stdout
        self.assertEqual(out.decode().strip(), "2")


if __name__ == "__main__":
    unittest.main()
