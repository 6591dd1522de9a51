"""A stand-in for gpumem_torch._dropin.GpumemBackend that keeps gpumem's tag book in Python (the
rules docs/sleep.md states: a process tag, sleep and wake by tag with keep or discard, repeats
reported unchanged, an unknown tag a ValueError, no allocation in a sleeping tag), so that the
drop-in shapes' checks and state machines run without PyTorch or a GPU. Every call is logged."""

import contextlib


class FakeBackend:
    def __init__(self, free_bytes=1 << 40, cuda_initialized=False):
        self.tag = "default"
        self.tags = {}  # gpumem tag -> {"allocated": bytes, "asleep": bool, "mode": "keep"/"discard", "content": {...}}
        self.calls = []
        self.free_bytes = free_bytes
        self.cuda = cuda_initialized
        self.enabled = False
        self.keep_cache = []  # the keep_cache of each sleep call
        self.retained = {}  # gpumem tag -> the content a wake with retain_backup kept

    # What a program does: allocate, and write or read content, in the current tag.
    def allocate(self, nbytes, name=None, value=None):
        state = self.tags.setdefault(self.tag, {"allocated": 0, "asleep": False, "mode": "keep", "content": {}})
        if state["asleep"]:
            raise RuntimeError(f"tag {self.tag!r} is asleep: wake it before allocating in it")
        state["allocated"] += nbytes
        if name is not None:
            state["content"][name] = value
        return self.tag

    def read(self, tag, name):
        state = self.tags[tag]
        if state["asleep"]:
            raise AssertionError(f"read of {name!r} while {tag!r} sleeps")
        return state["content"].get(name)

    # The backend's methods.
    def ensure_enabled(self, who):
        self.calls.append(("ensure_enabled", who))
        self.enabled = True

    def cuda_initialized(self):
        return self.cuda

    def set_tag(self, tag):
        previous, self.tag = self.tag, ("default" if tag is None else tag)
        return previous

    def current_tag(self):
        return self.tag

    def _check(self, tags):
        unknown = [t for t in tags if t not in self.tags]
        if unknown:
            raise ValueError(f"unknown tags {unknown}; known {list(self.tags)}")

    def sleep(self, tags, keep, keep_cache=False):
        self.calls.append(("sleep", list(tags), list(keep)))
        self.keep_cache.append(keep_cache)
        self._check(tags)
        changed = [t for t in tags if not self.tags[t]["asleep"]]
        for t in changed:
            state = self.tags[t]
            state["asleep"] = True
            state["mode"] = "keep" if t in keep else "discard"
            self.retained.pop(t, None)  # a retained backup is taken (or dropped) by the next sleep
            if t not in keep:
                state["content"] = {k: "undefined" for k in state["content"]}

    def wake(self, tags, retain_backup=False):
        self.calls.append(("wake", list(tags)))
        self._check(tags)
        changed = [t for t in tags if self.tags[t]["asleep"]]
        for t in changed:
            self.tags[t]["asleep"] = False
            if retain_backup and self.tags[t]["mode"] == "keep":
                self.retained[t] = dict(self.tags[t]["content"])

    def tag_stats(self):
        return [
            {
                "tag": t,
                "asleep": s["asleep"],
                "awake": not s["asleep"],
                "mode": s["mode"],
                "allocated_bytes": s["allocated"],
                "device_bytes": 0 if s["asleep"] else s["allocated"],
                "slept_bytes": s["allocated"] if s["asleep"] else 0,
                "backup_bytes": s["allocated"] if s["asleep"] and s["mode"] == "keep" else 0,
            }
            for t, s in self.tags.items()
        ]

    def trim_backup(self):
        self.calls.append(("trim_backup",))

    def empty_cache(self):
        self.calls.append(("empty_cache",))

    def read_backup(self, name):
        """The content saved for `name` while its tag sleeps in keep mode, or retained by its wake,
        else None (the fake's tensors are names)."""
        for tag, state in self.tags.items():
            if state["asleep"] and state["mode"] == "keep" and name in state["content"]:
                return state["content"][name]
            if not state["asleep"] and name in self.retained.get(tag, {}):
                return self.retained[tag][name]
        return None

    def view_backup(self, name):
        """As read_backup, marked as a view (the real one aliases the backup's host memory)."""
        found = self.read_backup(name)
        return None if found is None else ("view", found)

    def free_device_bytes(self):
        return self.free_bytes

    @contextlib.contextmanager
    def graph(self, cuda_graph, pool, stream, capture_error_mode):
        self.calls.append(("graph", cuda_graph, capture_error_mode))
        yield

    def names(self, call):
        return [c for c in self.calls if c[0] == call]
