"""The drop-in shapes' argument checks and state machines (gpumem_torch.saver: torch_memory_saver's
singleton; gpumem_torch.tagged_pool: vLLM's CuMemAllocator), over dropin_fake.FakeBackend: neither
PyTorch, the library nor a GPU is needed. On a GPU, test_dropin_gpu.py runs them over gpumem."""

import os
import sys
import threading
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(BINDINGS))
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)

import gpumem_torch  # noqa: E402
from dropin_fake import FakeBackend  # noqa: E402
from gpumem_torch import saver, tagged_pool  # noqa: E402


def new_saver(**kwargs):
    backend = FakeBackend(**kwargs)
    return saver.MemorySaver(backend), backend


class SaverRegionTests(unittest.TestCase):
    def test_a_region_is_a_gpumem_tag_per_tag_and_backup(self):
        s, b = new_saver()
        b.allocate(10)  # outside every region: gpumem's untagged default
        with s.region():
            self.assertEqual(b.allocate(1), "saver:default")
        with s.region(tag="kv", enable_cpu_backup=True):
            self.assertEqual(b.allocate(2), "saver:kv:cpu_backup")
        with s.region(tag="kv"):
            self.assertEqual(b.allocate(3), "saver:kv")
        self.assertEqual(b.current_tag(), "default")
        self.assertEqual(b.names("ensure_enabled"), [("ensure_enabled", "gpumem_torch.saver")])

    def test_regions_nest_and_restore(self):
        s, b = new_saver()
        with s.region(tag="outer", enable_cpu_backup=True):
            with s.region(tag="grad"):
                self.assertEqual(b.current_tag(), "saver:grad")
            self.assertEqual(b.current_tag(), "saver:outer:cpu_backup")
        self.assertEqual(b.current_tag(), "default")

    def test_the_tag_is_restored_after_an_exception(self):
        s, b = new_saver()
        with self.assertRaises(KeyError):
            with s.region(tag="a"):
                raise KeyError("inside")
        self.assertEqual(b.current_tag(), "default")

    def test_a_region_exited_on_another_thread(self):
        s, b = new_saver()
        block = s.region(tag="a")
        block.__enter__()
        done = []
        t = threading.Thread(target=lambda: done.append(block.__exit__(None, None, None)))
        t.start()
        t.join()
        self.assertEqual(done, [False])  # no exception swallowed
        self.assertEqual(b.current_tag(), "default")

    def test_regions_exited_out_of_order(self):
        s, b = new_saver()
        first, second = s.region(tag="a"), s.region(tag="b")
        first.__enter__()
        second.__enter__()  # as a second thread would
        with self.assertRaises(gpumem_torch.InvalidStateError) as e:
            first.__exit__(None, None, None)
        self.assertIn("out of order", str(e.exception))
        self.assertEqual(b.current_tag(), "saver:b")  # the open region keeps its tag
        second.__exit__(None, None, None)
        self.assertEqual(b.current_tag(), "saver:a")

    def test_bad_arguments(self):
        s, b = new_saver()
        cases = [
            (TypeError, lambda: s.region(tag=3)),
            (TypeError, lambda: s.region(enable_cpu_backup="yes")),
            (ValueError, lambda: s.region(cpu_backup_backend="pinned")),  # without enable_cpu_backup, as the peer
            (ValueError, lambda: s.region(enable_cpu_backup=True, cpu_backup_backend="disk")),
            (ValueError, lambda: s.region(enable_cpu_backup=True, enable_disk_backup=True)),
            (NotImplementedError, lambda: s.region(enable_disk_backup=True)),
        ]
        for error, make in cases:
            with self.subTest(error=error.__name__):
                with self.assertRaises(error):
                    with make():
                        pass
        self.assertEqual(b.current_tag(), "default")
        self.assertEqual(b.tags, {})
        for backend in saver.CPU_BACKUP_BACKENDS:
            with s.region(enable_cpu_backup=True, cpu_backup_backend=backend):
                self.assertEqual(b.current_tag(), "saver:default:cpu_backup")

    def test_cuda_graph_allocates_in_a_tag_of_its_own(self):
        s, b = new_saver()
        graph, again = object(), object()
        with s.cuda_graph(graph, tag="graph"):
            self.assertEqual(b.allocate(5), "saver:graph:graph1")
        with s.cuda_graph(again, tag="graph", enable_cpu_backup=True):
            self.assertEqual(b.allocate(5), "saver:graph:graph2:cpu_backup")
        self.assertEqual(b.names("graph"), [("graph", graph, "global"), ("graph", again, "global")])
        with s.region(tag="graph"):
            self.assertEqual(b.allocate(5), "saver:graph")  # never given a graph's freed memory
        s.pause("graph")  # every capture of the tag, its cache kept for the replay after resume
        self.assertEqual(b.names("sleep"), [("sleep", ["saver:graph:graph1", "saver:graph:graph2:cpu_backup", "saver:graph"],
                                             ["saver:graph:graph2:cpu_backup"])])
        self.assertEqual(b.keep_cache, [True])
        s.resume("graph")
        self.assertFalse(any(b.tags[t]["asleep"] for t in b.tags))


class SaverPauseTests(unittest.TestCase):
    def setUp(self):
        self.s, self.b = new_saver()
        self.b.allocate(100, "outside", 1)
        with self.s.region(tag="weights", enable_cpu_backup=True):
            self.b.allocate(10, "w", 7)
        with self.s.region(tag="kv_cache"):
            self.b.allocate(20, "kv", 8)

    def test_pause_every_region_keeps_the_backed_up_ones(self):
        self.s.pause()
        self.assertEqual(self.b.keep_cache, [True])  # as the peer's: the cache pauses and resumes too
        self.assertEqual(self.b.names("sleep"), [("sleep", ["saver:weights:cpu_backup", "saver:kv_cache"], ["saver:weights:cpu_backup"])])
        self.assertFalse(self.b.tags["default"]["asleep"])  # outside every region: never paused
        self.s.resume()
        self.assertEqual(self.b.read("saver:weights:cpu_backup", "w"), 7)
        self.assertEqual(self.b.read("saver:kv_cache", "kv"), "undefined")
        self.assertEqual(self.b.names("trim_backup"), [("trim_backup",)])  # retain_cpu_backup False

    def test_pause_one_tag(self):
        self.s.pause("kv_cache")
        self.assertTrue(self.b.tags["saver:kv_cache"]["asleep"])
        self.assertFalse(self.b.tags["saver:weights:cpu_backup"]["asleep"])
        self.s.resume("kv_cache")
        self.assertFalse(self.b.tags["saver:kv_cache"]["asleep"])

    def test_one_tag_with_and_without_backup(self):
        with self.s.region(tag="kv_cache", enable_cpu_backup=True):
            self.b.allocate(5, "kept", 3)
        self.s.pause("kv_cache")
        self.assertEqual(self.b.names("sleep")[0][2], ["saver:kv_cache:cpu_backup"])
        self.s.resume("kv_cache")
        self.assertEqual(self.b.read("saver:kv_cache:cpu_backup", "kept"), 3)

    def test_an_empty_tag_is_every_tag_and_an_unknown_one_nothing(self):
        self.s.pause("no_such_tag")
        self.s.resume("no_such_tag")
        self.assertEqual(self.b.names("sleep") + self.b.names("wake"), [])
        self.s.pause("")
        self.assertEqual(len(self.b.names("sleep")[0][1]), 2)

    def test_pause_of_a_paused_tag(self):
        self.s.pause("kv_cache")
        with self.assertRaises(gpumem_torch.InvalidStateError) as e:
            self.s.pause()
        self.assertIn("'kv_cache' is paused already", str(e.exception))
        self.assertFalse(self.b.tags["saver:weights:cpu_backup"]["asleep"])  # nothing was done
        self.assertEqual(len(self.b.names("sleep")), 1)

    def test_resume_without_pause(self):
        with self.assertRaises(gpumem_torch.InvalidStateError) as e:
            self.s.resume("weights")
        self.assertIn("'weights' is not paused", str(e.exception))
        self.s.pause("kv_cache")
        with self.assertRaises(gpumem_torch.InvalidStateError):
            self.s.resume()  # weights is awake
        self.assertTrue(self.b.tags["saver:kv_cache"]["asleep"])
        self.assertEqual(self.b.names("wake"), [])

    def test_bad_tags(self):
        for call in (self.s.pause, self.s.resume):
            with self.subTest(call=call.__name__):
                with self.assertRaises(TypeError):
                    call(5)

    def test_memory_margin(self):
        with self.assertRaises(NotImplementedError):
            self.s.memory_margin_bytes  # noqa: B018  (the peer has a setter only)
        for bad, error in ((-1, ValueError), ("1GiB", TypeError), (True, TypeError)):
            with self.assertRaises(error):
                self.s.memory_margin_bytes = bad
        self.s.pause()
        self.b.free_bytes = 40
        self.s.memory_margin_bytes = 20  # 30 bytes slept + 20 > 40 free
        with self.assertRaises(gpumem_torch.OutOfMemoryError) as e:
            self.s.resume()
        self.assertIn("memory_margin_bytes=20", str(e.exception))
        self.assertEqual(self.b.names("wake"), [])
        self.s.memory_margin_bytes = 10
        self.s.resume()
        self.assertEqual(len(self.b.names("wake")), 1)

    def test_retain_cpu_backup(self):
        self.assertIs(self.s.retain_cpu_backup, False)
        self.s.pause()
        self.s.retain_cpu_backup = True  # read at resume, as the peer's
        self.assertIs(self.s.retain_cpu_backup, True)
        with self.assertRaises(TypeError):
            self.s.retain_cpu_backup = 1
        self.s.resume()
        self.assertEqual(self.b.names("trim_backup"), [])
        self.assertEqual(self.s.get_cpu_backup("w"), 7)  # resumed, its backup retained
        self.assertEqual(self.s.get_cpu_backup("w", zero_copy=True), ("view", 7))
        self.s.retain_cpu_backup = False
        self.assertEqual(self.s.get_cpu_backup("w"), 7)  # until it pauses again
        self.s.pause()
        self.s.resume()
        self.assertIsNone(self.s.get_cpu_backup("w"))
        self.assertEqual(self.b.names("trim_backup"), [("trim_backup",)])

    def test_disable(self):
        with self.assertRaises(gpumem_torch.InvalidStateError):
            with self.s.disable():
                pass
        with self.s.region(tag="weights", enable_cpu_backup=True):
            with self.s.disable():
                self.assertEqual(self.b.allocate(1), "default")
            self.assertEqual(self.b.current_tag(), "saver:weights:cpu_backup")
        self.assertEqual(self.b.names("empty_cache"), [("empty_cache",)])

    def test_get_cpu_backup(self):
        self.assertIsNone(self.s.get_cpu_backup("w"))  # awake: no backup
        self.s.pause()
        self.assertEqual(self.s.get_cpu_backup("w"), 7)
        self.assertEqual(self.s.get_cpu_backup("w", zero_copy=True), ("view", 7))
        self.assertIsNone(self.s.get_cpu_backup("kv"))  # paused without a backup
        with self.assertRaises(TypeError):
            self.s.get_cpu_backup("w", zero_copy="yes")
        self.s.resume()
        self.assertIsNone(self.s.get_cpu_backup("w"))

    def test_what_gpumem_does_not_have(self):
        with self.assertRaises(NotImplementedError):
            self.s.set_disk_backup_dir("/tmp/backup")


class SaverSetupTests(unittest.TestCase):
    def test_hook_modes_are_one_mechanism(self):
        for mode in saver.HOOK_MODES:
            s, b = new_saver()
            s.hook_mode = mode
            self.assertEqual(s.hook_mode, mode)
            self.assertTrue(b.enabled)  # installed now, before the first CUDA tensor
        s, b = new_saver(cuda_initialized=True)
        s.hook_mode = "torch"  # too late to install here: the first use will say so
        self.assertFalse(b.enabled)
        with self.assertRaises(ValueError):
            s.hook_mode = "ld_preload"
        self.assertIs(s.enabled, True)

    def test_init_enable_from_the_environment(self):
        with mock.patch.dict(os.environ, {"TMS_INIT_ENABLE": "1", "TMS_INIT_ENABLE_CPU_BACKUP": "1"}):
            s, b = new_saver()
            s.hook_mode = "preload"
        self.assertEqual(b.allocate(4, "model", 42), "saver:default:cpu_backup")
        with s.region(tag="grad_buffer"):
            b.allocate(4, "grad", 1)
        with s.disable():
            self.assertEqual(b.allocate(8), "default")
        s.pause()
        self.assertEqual(b.names("sleep"), [("sleep", ["saver:default:cpu_backup", "saver:grad_buffer"], ["saver:default:cpu_backup"])])
        s.resume()
        self.assertEqual(b.read("saver:default:cpu_backup", "model"), 42)

    def test_retain_from_the_environment(self):
        with mock.patch.dict(os.environ, {"TMS_RETAIN_CPU_BACKUP": "1"}):
            s, _ = new_saver()
        self.assertIs(s.retain_cpu_backup, True)

    def test_a_tag_asleep_on_one_device_and_awake_on_another(self):
        s, b = new_saver()
        with s.region(tag="kv"):
            b.allocate(5)
        mixed = [{"tag": "saver:kv", "asleep": True, "awake": True, "allocated_bytes": 10, "slept_bytes": 5}]
        with mock.patch.object(b, "tag_stats", return_value=mixed):
            with self.assertRaises(gpumem_torch.InvalidStateError):
                s.pause("kv")
            with self.assertRaises(gpumem_torch.InvalidStateError):
                s.resume("kv")
        self.assertEqual(b.names("sleep") + b.names("wake"), [])

    def test_the_module_s_singleton_and_configure_subprocess(self):
        self.assertIsInstance(saver.memory_saver, saver.MemorySaver)
        before = dict(os.environ)
        with saver.configure_subprocess():
            self.assertEqual(dict(os.environ), before)


class TaggedPoolTests(unittest.TestCase):
    def setUp(self):
        self.b = FakeBackend()
        self.p = tagged_pool.TaggedPool(self.b)
        self.b.allocate(100, "x", 1)  # outside every pool
        with self.p.use_memory_pool():
            self.assertEqual(self.p.current_tag, "default")
            self.b.allocate(10, "y", 2)
        with self.p.use_memory_pool(tag="weights"):
            self.b.allocate(20, "w", 3)
        with self.p.use_memory_pool(tag="kv_cache"):
            self.b.allocate(40, "kv", 4)

    def test_pool_tags_are_gpumem_tags_of_their_own(self):
        self.assertEqual(list(self.b.tags), ["default", "pool:default", "pool:weights", "pool:kv_cache"])
        self.assertEqual(self.p.current_tag, "default")
        self.assertEqual(self.b.current_tag(), "default")
        self.assertEqual(self.p.get_current_usage(), 70)

    def test_sleep_keeps_the_default_pool_tag_by_default(self):
        self.p.sleep()
        self.assertEqual(
            self.b.names("sleep"), [("sleep", ["pool:default", "pool:weights", "pool:kv_cache"], ["pool:default"])]
        )
        self.assertFalse(self.b.tags["default"]["asleep"])  # memory outside every pool stays
        self.assertEqual(self.b.names("empty_cache"), [("empty_cache",)])
        self.assertEqual(self.p.get_current_usage(), 70)  # asleep or awake
        self.p.wake_up()
        self.assertEqual(self.b.read("pool:default", "y"), 2)
        self.assertEqual(self.b.read("pool:weights", "w"), "undefined")

    def test_sleep_with_offload_tags_and_wake_by_tag(self):
        self.p.sleep(offload_tags=("weights",))
        self.assertEqual(self.b.names("sleep")[0][2], ["pool:weights"])
        self.p.wake_up(["weights", "never_used"])  # a tag no pool allocated in is ignored, as vLLM's
        self.assertEqual(self.b.names("wake"), [("wake", ["pool:weights"])])
        self.assertEqual(self.b.read("pool:weights", "w"), 3)
        self.assertTrue(self.b.tags["pool:kv_cache"]["asleep"])
        self.p.wake_up(["kv_cache"])
        self.assertEqual(self.b.read("pool:kv_cache", "kv"), "undefined")
        self.p.wake_up()  # the rest: the default pool tag
        self.assertEqual(self.b.names("wake")[2], ("wake", ["pool:default"]))
        self.p.wake_up()  # nothing asleep: nothing to do
        self.assertEqual(len(self.b.names("wake")), 3)

    def test_offload_tags_spellings(self):
        self.p.sleep("kv_cache")
        self.assertEqual(self.b.names("sleep")[0][2], ["pool:kv_cache"])
        self.p.wake_up()
        self.p.sleep(offload_tags=["weights", "unknown"])
        self.assertEqual(self.b.names("sleep")[1][2], ["pool:weights"])
        self.p.wake_up()
        self.p.sleep(offload_tags=())  # vLLM's level 2: everything discarded
        self.assertEqual(self.b.names("sleep")[2][2], [])

    def test_sleeping_twice_leaves_asleep_tags_alone(self):
        self.p.sleep(offload_tags=("weights",))
        self.p.sleep(offload_tags=())
        self.assertEqual(len(self.b.names("sleep")), 1)
        self.p.wake_up()
        self.assertEqual(self.b.read("pool:weights", "w"), 3)

    def test_bad_arguments(self):
        for bad in (5, [1], {"weights": 1}):
            with self.subTest(offload_tags=bad):
                with self.assertRaises(TypeError):
                    self.p.sleep(offload_tags=bad)
        with self.assertRaises(TypeError):
            self.p.wake_up(tags=7)
        with self.assertRaises(TypeError):
            with self.p.use_memory_pool(tag=1):
                pass
        self.assertEqual(self.b.names("sleep"), [])

    def test_blocks_nest_and_out_of_order_exit(self):
        with self.p.use_memory_pool(tag="a"):
            with self.p.use_memory_pool(tag="b"):
                self.assertEqual((self.p.current_tag, self.b.current_tag()), ("b", "pool:b"))
            self.assertEqual((self.p.current_tag, self.b.current_tag()), ("a", "pool:a"))
        first, second = self.p.use_memory_pool(tag="a"), self.p.use_memory_pool(tag="b")
        first.__enter__()
        second.__enter__()
        with self.assertRaises(gpumem_torch.InvalidStateError):
            first.__exit__(None, None, None)
        second.__exit__(None, None, None)

    def test_get_instance_is_one_per_process(self):
        with mock.patch.object(tagged_pool, "GpumemBackend", FakeBackend), mock.patch.object(tagged_pool.TaggedPool, "instance", None):
            first = tagged_pool.TaggedPool.get_instance()
            self.assertIs(tagged_pool.TaggedPool.get_instance(), first)
            self.assertEqual(first._backend.names("ensure_enabled"), [("ensure_enabled", "gpumem_torch.tagged_pool")])


class DocsTests(unittest.TestCase):
    """docs/sleep.md has a section per shape that names each of its public members."""

    def test_every_public_member_is_in_the_docs(self):
        with open(os.path.join(REPO, "docs", "sleep.md"), encoding="utf-8") as f:
            text = f.read()
        shapes = {
            "## torch_memory_saver's shape": (saver.MemorySaver, ["memory_saver", "gpumem_torch.saver", "configure_subprocess"]),
            "## vLLM's CuMemAllocator shape": (tagged_pool.TaggedPool, ["gpumem_torch.tagged_pool"]),
        }
        for heading, (cls, extra) in shapes.items():
            with self.subTest(shape=heading):
                self.assertIn(heading, text)
                section = text.split(heading, 1)[1].split("\n## ", 1)[0]
                members = [n for n in vars(cls) if not n.startswith("_")] + extra
                for name in members:
                    self.assertIn(f"`{name}", section, f"{name} is not in the section {heading!r}")


if __name__ == "__main__":
    unittest.main()
