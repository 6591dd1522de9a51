"""The one writer of the files gpumem_torch writes, as packages/allocator-core's OutputFile and
libgpumem_torch's trace recorder (native/src/torch/output_file.hpp) write theirs.

A file is written whole or not at all: into a new temporary file in the target's folder, synced,
then renamed over the target. So a failed write leaves the previous file or none, a hard link's
other names keep their bytes (the target gets a new inode), and a replaced file keeps its
permission bits (and, for root, its owner); a new one gets 0666 less the umask. Only regular
files are replaced: a device, FIFO, socket or folder is refused and never written through; the
null device takes the bytes as they come. A symbolic link is followed to the file it names, which
is replaced. A NUL byte in a name is refused (the system would stop at it and write to a shorter
name). Every error is an :class:`OutputFileError` naming the file. Only the standard library."""

from __future__ import annotations

import contextlib
import errno as _errno
import os
import stat
from typing import Any, NamedTuple, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


class OutputFileError(OSError, ValueError):
    """Writing an output file failed, or the path cannot be one; nothing was left behind.
    ``path``: the path as given, ``reason``: what is wrong, ``errno_name``: the system error's
    name (``ENOSPC``, ...) when one caused it, ``code``: ``"GPUMEM_OUTPUT_FILE"``."""

    code = "GPUMEM_OUTPUT_FILE"

    def __init__(self, path: str, reason: str, errno_name: Optional[str] = None):
        super().__init__(f"gpumem: cannot write {path!r}: {reason}")
        self.path = path
        self.reason = reason
        self.errno_name = errno_name

    def __str__(self) -> str:
        return self.args[0]


def check_path(path: Any) -> str:
    """``path`` as a string; an :class:`OutputFileError` for an empty name, a NUL byte or a value
    that is not a path."""
    try:
        name = os.fspath(path)
    except TypeError:
        raise OutputFileError(repr(path), f"expected a path (str or os.PathLike) but received {type(path).__name__}") from None
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if name == "":
        raise OutputFileError(name, "the file name is empty")
    if "\0" in name:
        raise OutputFileError(name, "the file name contains a NUL byte")
    return name


def _kind(mode: int) -> Optional[str]:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder; give a file name"
    if stat.S_ISFIFO(mode):
        return "is a named pipe (FIFO); give a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket; give a regular file"
    if stat.S_ISCHR(mode):
        return "is a character device; give a regular file"
    if stat.S_ISBLK(mode):
        return "is a block device; give a regular file"
    return "is not a regular file; give a regular file"


def _is_null_device(st: os.stat_result) -> bool:
    try:
        return stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat("/dev/null").st_rdev
    except OSError:
        return False


def _errno_name(e: OSError) -> Optional[str]:
    return _errno.errorcode.get(e.errno) if e.errno is not None else None


class OutputTarget(NamedTuple):
    """Where an output goes: ``path`` (absolute; a symbolic link's final file), the file there now
    (``existing``, None for a new one), and ``discard`` for the null device."""

    path: str
    existing: Optional[os.stat_result]
    discard: bool


def output_target(path: PathLike) -> OutputTarget:
    """Where writing ``path`` would go, or an :class:`OutputFileError` saying why it cannot be
    written: a device, FIFO, socket or folder (at the path or at the end of its links), a link to
    nothing, a folder that does not exist, a NUL byte. Creates nothing."""
    given = check_path(path)
    full = os.path.abspath(given)
    try:
        st: Optional[os.stat_result] = os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError as e:
        raise OutputFileError(given, e.strerror or str(e), _errno_name(e)) from None
    target = full
    if st is not None and stat.S_ISLNK(st.st_mode):
        if not os.path.exists(full):
            raise OutputFileError(given, f"is a symbolic link to {os.readlink(full)}, which does not exist; give the file itself")
        target = os.path.realpath(full)
        st = os.lstat(target)
    if st is not None:
        if _is_null_device(st):
            return OutputTarget(target, st, True)
        kind = _kind(st.st_mode)
        if kind is not None:
            raise OutputFileError(given, kind)
        return OutputTarget(target, st, False)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        parent_is_file = any(os.path.isfile(p) for p in _parents(folder))
        raise OutputFileError(given, f"a parent of {folder} is a file, not a folder" if parent_is_file else f"the folder {folder} does not exist")
    return OutputTarget(target, None, False)


def _parents(folder: str):
    while True:
        yield folder
        up = os.path.dirname(folder)
        if up == folder:
            return
        folder = up


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether ``a`` and ``b`` are one file (device and inode, after symbolic links); False when
    either does not exist."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


class OutputFile:
    """An output file being written (see the module's description): :meth:`write` appends,
    :meth:`commit` syncs and renames over the target, :meth:`discard` removes the temporary file.
    As a context manager it commits on success and discards on an exception."""

    def __init__(self, path: PathLike):
        self.path = check_path(path)
        self._target = output_target(self.path)
        self._fd: Optional[int] = None
        self._temporary: Optional[str] = None
        if self._target.discard:
            return
        folder, name = os.path.split(self._target.path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        for _ in range(16):  # O_EXCL: never an existing file, nor a link someone placed under this name
            temporary = os.path.join(folder, f".{name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
            try:
                self._fd = os.open(temporary, flags, 0o666)
                self._temporary = temporary
                break
            except FileExistsError:
                continue
            except OSError as e:
                raise OutputFileError(self.path, f"cannot create a file in {folder} ({e.strerror})", _errno_name(e)) from None
        if self._fd is None:
            raise OutputFileError(self.path, f"cannot create a file in {folder} (every temporary name was taken)")
        existing = self._target.existing
        if existing is not None:
            try:
                os.fchmod(self._fd, stat.S_IMODE(existing.st_mode))
                if os.geteuid() == 0:
                    os.fchown(self._fd, existing.st_uid, existing.st_gid)
            except OSError as e:
                self._fail(e, "cannot give the new file the mode of the one it replaces")

    def write(self, data: Union[str, bytes]) -> None:
        """Appends ``data`` (a str as UTF-8). An :class:`OutputFileError` leaves the target untouched."""
        if self._target.discard:
            return
        fd = self._open_fd()
        view = memoryview(data.encode("utf-8") if isinstance(data, str) else data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError as e:
            self._fail(e, "writing failed")

    def commit(self) -> None:
        """Syncs the new file and renames it over the target. An :class:`OutputFileError` leaves the target untouched."""
        if self._target.discard:
            return
        fd = self._open_fd()
        try:
            os.fsync(fd)
            os.close(fd)
            self._fd = None
            now = os.lstat(self._target.path) if os.path.lexists(self._target.path) else None
            kind = None if now is None else _kind(now.st_mode)
            if kind is not None:  # swapped for a device or a folder since it was opened
                self.discard()
                raise OutputFileError(self.path, "is now " + kind[len("is "):])
            os.replace(self._temporary, self._target.path)  # type: ignore[arg-type]
        except OSError as e:
            if isinstance(e, OutputFileError):
                raise
            self._fail(e, "completing the file failed")
        self._temporary = None
        with contextlib.suppress(OSError):  # the rename's durability across a power cut: best effort
            folder = os.open(os.path.dirname(self._target.path), os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)

    def discard(self) -> None:
        """Removes the temporary file; the target stays as it was. Safe to call more than once."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._temporary)
            self._temporary = None

    def __enter__(self) -> "OutputFile":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()

    def _open_fd(self) -> int:
        if self._fd is None:
            raise OutputFileError(self.path, "the file was already completed or discarded")
        return self._fd

    def _fail(self, e: OSError, what: str) -> None:
        self.discard()
        kept = "its previous content is kept" if self._target.existing is not None else "nothing was written"
        raise OutputFileError(self.path, f"{what} ({_errno_name(e) or ''}: {e.strerror or e}); {kept}", _errno_name(e)) from None


def write_output(path: PathLike, data: Union[str, bytes]) -> None:
    """Writes ``data`` to ``path`` whole or not at all (see :class:`OutputFile`)."""
    with OutputFile(path) as out:
        out.write(data)
