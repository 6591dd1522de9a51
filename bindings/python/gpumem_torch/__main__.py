"""``python -m gpumem_torch doctor FILE [--capacity SIZE] [--json [OUT|-]]``: gpumem doctor without
Node.js: the same verdict, figures and JSON, from the standard library and libgpumem_torch.so
(no torch needed for a file). Exit status: 0 with a verdict, 1 when the file cannot be read or the
replays fail, 2 for bad usage."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, TextIO

from ._terminal import escape_terminal_lines

USAGE_EXIT, READ_EXIT = 2, 1


def _say(text: str, file: Optional[TextIO] = None) -> None:
    """Prints text meant for a person, its control characters escaped (a trace's strings, tags and frames are data)."""
    print(escape_terminal_lines(text), file=sys.stdout if file is None else file)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        _say(f"gpumem_torch doctor: {message}", file=sys.stderr)
        raise SystemExit(USAGE_EXIT)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m gpumem_torch doctor",
        description="Is this OOM real? Reads a PyTorch memory snapshot (the pickle of torch.cuda.memory._dump_snapshot(), "
        "optionally gzip-compressed) or a gpumem JSONL trace, and gives one verdict: fits, fragmentation or real "
        "(docs/torch.md). The same verdict and JSON as gpumem doctor.",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--capacity", metavar="SIZE", help="the device's capacity, e.g. 80GiB (default: the snapshot's, recorded at its OOM, else this GPU's total memory)")
    p.add_argument("--outside", metavar="SIZE|LOW..HIGH", help="device memory outside the allocator (CUDA context, cuBLAS workspaces, NCCL, the driver's reserve) (default: 150MiB..250MiB; 0 when the capacity is the snapshot's own)")
    p.add_argument("--model-error", metavar="FRACTION", help="the relative error of the model of PyTorch's allocator, e.g. 0.004 for ±0.4%% (the default, with 4 MiB at the least)")
    p.add_argument("--resolution", metavar="SIZE", help="precision of the minimum-capacity searches (default: the capacity / 1024, 4 KiB to 2 MiB)")
    p.add_argument("--skip-failed-requests", action="store_true", help="leave out the requests that failed in the recording")
    p.add_argument("--device", type=int, metavar="N", help="PyTorch snapshots: the device whose history to read (default: the first with events)")
    p.add_argument("--json", nargs="?", const="-", metavar="OUT", help="write the verdict as JSON to OUT ('-' or nothing: stdout, the rest to stderr)")
    return p


def _table(header: List[str], rows: List[List[str]]) -> str:
    widths = [max(len(r[k]) for r in [header] + rows) for k in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _text(body: dict) -> str:
    from ._sizes import format_bytes

    v = body["verdict"]
    d = v["decision"]
    b = d["band"]
    out = [f"capacity {format_bytes(v['capacityBytes'])} ({body['capacitySource']})", "",
           f"verdict: {'too-close (too close to call)' if v['kind'] == 'too-close' else v['kind']}"]  # fmt: skip
    out += [f"  {line}" for line in v["lines"]]
    side = f"{format_bytes(d['marginBytes'])} above" if d["marginBytes"] >= 0 else f"{format_bytes(-d['marginBytes'])} below"
    out += [
        f"  decided by {d['label']}: band {format_bytes(b['lowBytes'])} to {format_bytes(b['highBytes'])} (need {format_bytes(b['needBytes'])}, "
        f"outside the allocator {format_bytes(b['outsideLowBytes'])} to {format_bytes(b['outsideHighBytes'])}, model error ±{format_bytes(b['modelErrorBytes'])}), "
        f"capacity {side} its middle",
        "",
    ]  # fmt: skip

    def cells(s: dict) -> List[str]:
        if "error" in s:
            return [s["label"], s["memory"], "yes" if s["ranked"] else "no", "failed", "-", "-", "-", "-"]
        call = s.get("call")
        fits = "-" if call is None else "too close" if call == "too-close" else "yes" if call == "fits" else "no"
        need = format_bytes(s["needBytes"]) if "needBytes" in s else f"> {format_bytes(s.get('minCapacity', {}).get('capBytes', v['capacityBytes']))}"
        band = f"{format_bytes(s['band']['lowBytes'])} - {format_bytes(s['band']['highBytes'])}" if "band" in s else "-"
        left = format_bytes(v["capacityBytes"] - s["needBytes"]) if "needBytes" in s else "-"
        probes = str(s["minCapacity"]["probes"]) if "minCapacity" in s else "-"
        return [s["label"], s["memory"], "yes" if s["ranked"] else "no", fits, need, band, left, probes]

    rows = [cells(s) for s in v["strategies"]]
    if not any(s["label"] == v["pytorch"]["label"] for s in v["strategies"]):
        rows.append(cells({**v["pytorch"], "label": f"{v['pytorch']['label']} (PyTorch's default)"}))
    out.append(_table(["strategy", "memory", "ranked", "fits", "needs", "device band", "capacity left", "probes"], rows))
    out += ["", "notes:"] + [f"  {n}" for n in v["notes"]]
    return "\n".join(out) + "\n"


def _model_error(text: str) -> float:
    """--model-error: a number from 0 to 0.5."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 0.5:  # NaN fails too
        raise ValueError(f"'--model-error' must be a number from 0 to 0.5 (received '{text}')")
    return value


def doctor_main(argv: List[str]) -> int:
    from . import _band, _doctor, _doctor_api, _replay, _tracefile

    args = _parser().parse_args(argv)
    if "\0" in args.file or (args.json and "\0" in args.json):
        _say("gpumem_torch doctor: a path holds a NUL byte; no file can have that name", file=sys.stderr)
        return USAGE_EXIT
    try:
        given = None if args.capacity is None else _doctor_api.capacity_bytes_of(args.capacity, "'--capacity'")
        resolution = None if args.resolution is None else _doctor_api.capacity_bytes_of(args.resolution, "'--resolution'")
        outside = None if args.outside is None else _doctor_api.parse_outside(args.outside)
        model_error = None if args.model_error is None else _model_error(args.model_error)
    except (ValueError, TypeError) as e:
        _say(f"gpumem_torch doctor: {e}", file=sys.stderr)
        return USAGE_EXIT
    if args.json and args.json != "-":  # checked before any work, as gpumem doctor does
        from . import _output

        try:
            _output.output_target(args.json)
        except _output.OutputFileError as e:
            print(f"gpumem_torch doctor: '--json' {args.json}: {e.reason}", file=sys.stderr)
            return USAGE_EXIT
        if _output.same_file(args.json, args.file):
            print(f"gpumem_torch doctor: '--json' {args.json} is the trace FILE: writing it would overwrite the input; give another file", file=sys.stderr)
            return USAGE_EXIT
    if args.device is not None and not 0 <= args.device <= 1023:
        _say(f"gpumem_torch doctor: '--device' must be from 0 to 1023 (received {args.device})", file=sys.stderr)
        return USAGE_EXIT
    out = sys.stderr if args.json == "-" else sys.stdout
    try:
        trace = _tracefile.read_trace(args.file, args.device)
    except _tracefile.TraceFileError as e:
        _say(f"gpumem_torch doctor: cannot read '{args.file}': {e}", file=sys.stderr)
        return READ_EXIT
    except _tracefile.TraceFormatError as e:
        what = "trace past the readers' budget" if getattr(e, "code", None) == "ERR_TRACE_BUDGET" else "malformed trace"
        _say(f"gpumem_torch doctor: {what}: {e}", file=sys.stderr)
        return READ_EXIT
    except OSError as e:
        why = "no such file" if isinstance(e, FileNotFoundError) else (e.strerror or str(e))
        _say(f"gpumem_torch doctor: cannot read '{args.file}': {why}", file=sys.stderr)
        return READ_EXIT
    try:
        capacity, source = _doctor_api.capacity_for(given, trace)
    except _doctor_api.NoCapacityError as e:
        _say(f"gpumem_torch doctor: {e}", file=sys.stderr)
        return USAGE_EXIT
    try:
        left_out = _replay.driver_strategies()
        if left_out:
            _say(f"gpumem_torch doctor: leaving out {', '.join(left_out)}: their memory is the driver's (cudaMalloc per call, managed memory, "
                  "cudaMallocAsync's pool), whose rounding and caching a replay under a byte limit does not see", file=sys.stderr)  # fmt: skip
        _say(f"trace {args.file} ({trace.format}; {_doctor.origin_of(trace)}), {len(trace.events)} events", file=out)
        verdict = _doctor.diagnose_oom(
            trace, capacity, resolution, "skip" if args.skip_failed_requests else "replay",
            outside=_doctor_api.outside_for(outside, given is not None, trace, source),
            pytorch_model_error=_band.DEFAULT_PYTORCH_MODEL_ERROR if model_error is None else model_error,
        )  # fmt: skip
    except (OSError, RuntimeError) as e:  # the library missing or refusing (FileNotFoundError, ReplayError)
        _say(f"gpumem_torch doctor: {str(e).splitlines()[0]}", file=sys.stderr)
        return READ_EXIT
    text = _doctor.doctor_json(args.file, trace, source, verdict)
    out.write(escape_terminal_lines(_text({"capacitySource": source, "verdict": verdict})))
    if args.json == "-":
        sys.stdout.write(text)
    elif args.json:
        from . import _output

        try:
            _output.write_output(args.json, text)
        except _output.OutputFileError as e:
            _say(f"gpumem_torch {e}", file=sys.stderr)
            return READ_EXIT
        _say(f"wrote {args.json}", file=out)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        _say("Usage: python -m gpumem_torch doctor FILE [--capacity SIZE] [--resolution SIZE] [--skip-failed-requests] [--device N] [--json [OUT|-]]")
        return 0 if argv else USAGE_EXIT
    if argv[0] != "doctor":
        _say(f"gpumem_torch: unknown command '{argv[0]}'; the command is: doctor", file=sys.stderr)
        return USAGE_EXIT
    try:
        return doctor_main(argv[1:])
    except KeyboardInterrupt:
        return 130
    except MemoryError:
        _say("gpumem_torch doctor: out of host memory reading or replaying the trace", file=sys.stderr)
        return READ_EXIT
    except Exception as e:  # noqa: BLE001  # one line, never a traceback: the message names what failed
        reason = str(e).splitlines()[0] if str(e) else ""
        _say(f"gpumem_torch doctor: failed: {type(e).__name__}: {reason}", file=sys.stderr)
        return READ_EXIT


if __name__ == "__main__":
    sys.exit(main())
