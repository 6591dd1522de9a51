"""The strategy names and option keywords of enable() and allocator(), read from the library's
registry (gpumem_strategies()), and the deprecated spellings they keep for one release
(npm run test:torch).

- DeriveTests need nothing: the derivation over a listing written here.
- LibraryKeywordTests need the built library (no PyTorch, no GPU); without it they are skipped.
- MissingLibraryTests point GPUMEM_TORCH_LIB at nothing: the package's own error, as before.
"""

import json
import os
import subprocess
import sys
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)

import gpumem_torch  # noqa: E402
from gpumem_torch import _library  # noqa: E402

HAVE_LIB = os.path.exists(gpumem_torch.library_path())
LIB_REASON = f"libgpumem_torch.so not found at {gpumem_torch.library_path()} (build native/ with CUDA or set GPUMEM_TORCH_LIB)"

# The keywords enable() and allocator() took before they were read from the library, each with the
# variable it sets now: every one keeps working ('native_library' with a deprecation warning).
KEYWORDS_BEFORE = {
    "uvm_prefetch": "GPUMEM_UVM_PREFETCH",
    "prefetch": "GPUMEM_UVM_PREFETCH",
    "uvm_advise": "GPUMEM_UVM_ADVISE",
    "advise": "GPUMEM_UVM_ADVISE",
    "uvm_limit": "GPUMEM_UVM_LIMIT",
    "async_release_threshold": "GPUMEM_ASYNC_RELEASE_THRESHOLD",
    "release_threshold": "GPUMEM_ASYNC_RELEASE_THRESHOLD",
    "pool_max_reserved": "GPUMEM_POOL_MAX_RESERVED",
    "max_reserved": "GPUMEM_POOL_MAX_RESERVED",
    "oom": "GPUMEM_OOM",
    "native_library": "GPUMEM_PLUGIN_LIBRARY",
    "library": "GPUMEM_PLUGIN_LIBRARY",
    "plugin_options": "GPUMEM_PLUGIN_OPTIONS",
    "tiered_device_budget": "GPUMEM_TIERED_DEVICE_BUDGET",
    "device_budget": "GPUMEM_TIERED_DEVICE_BUDGET",
    "tiered_host_budget": "GPUMEM_TIERED_HOST_BUDGET",
    "host_budget": "GPUMEM_TIERED_HOST_BUDGET",
    "tiered_placement": "GPUMEM_TIERED_PLACEMENT",
    "placement": "GPUMEM_TIERED_PLACEMENT",
    "expandable_unmap_idle_before_growth": "GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH",
    "unmap_idle_before_growth": "GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH",
}


def _clean_env(**overrides):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    env["GPUMEM_TORCH_LIB"] = gpumem_torch.library_path()
    env.update(overrides)
    return env


def run_process(code, **env):
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {BINDINGS!r})\n" + code],
        capture_output=True,
        text=True,
        env=_clean_env(**env),
        timeout=120,
    )


def _strategy(name, options=(), aliases=(), kernel_memory=True):
    return {
        "name": name,
        "aliases": list(aliases),
        "flags": {"kernelMemory": kernel_memory},
        "options": [{"key": key, "env": env, "envAliases": list(older)} for key, env, older in options],
    }


class DeriveTests(unittest.TestCase):
    """derive_registry over a listing of the library's form."""

    def setUp(self):
        self.registry = _library.derive_registry(
            [
                _strategy("host", kernel_memory=False),
                _strategy("pool", [("maxReservedBytes", "GPUMEM_POOL_MAX_RESERVED", ()), ("smallRequestLimit", None, ())]),
                _strategy("pinned", [("maxReservedBytes", "GPUMEM_POOL_MAX_RESERVED", ())]),
                _strategy("uvm", [("budget", "GPUMEM_UVM_BUDGET", ())]),
                _strategy("tiered", [("budget", "GPUMEM_TIERED_BUDGET", ()), ("limit", "GPUMEM_TIERED_LIMIT", ())]),
                _strategy("plugin", [("library", "GPUMEM_PLUGIN_LIBRARY", ["GPUMEM_NATIVE_LIBRARY"])], aliases=["native"]),
            ]
        )

    def test_names_are_those_whose_memory_kernels_use(self):
        self.assertEqual(self.registry.names, ("pool", "pinned", "uvm", "tiered", "plugin"))
        self.assertEqual(self.registry.aliases, {"native": "plugin"})

    def test_keywords(self):
        options = self.registry.options
        # The variable's name in lower case without GPUMEM_, and the library's own settings.
        for keyword in ("pool_max_reserved", "uvm_budget", "tiered_budget", "plugin_library", "uvm_limit", "oom"):
            self.assertIn(keyword, options)
        self.assertEqual(options["pool_max_reserved"], "GPUMEM_POOL_MAX_RESERVED")
        # Without the strategy's name where one variable is spelled so: pinned shares pool's variable,
        # which keeps its one short form.
        self.assertEqual(options["max_reserved"], "GPUMEM_POOL_MAX_RESERVED")
        self.assertEqual(options["library"], "GPUMEM_PLUGIN_LIBRARY")
        # 'budget' would be uvm's or tiered's: neither; 'limit' would be tiered's or the library's uvm_limit's
        # short form (which has none): tiered's.
        self.assertNotIn("budget", options)
        self.assertEqual(options["limit"], "GPUMEM_TIERED_LIMIT")
        self.assertEqual(self.registry.deprecated_options, {"native_library": "GPUMEM_PLUGIN_LIBRARY"})
        self.assertEqual(self.registry.variables[0], "GPUMEM_ALLOCATOR")
        self.assertEqual(set(self.registry.variables[1:]), set(options.values()))
        self.assertEqual(len(self.registry.variables), len(set(self.registry.variables)))

    def test_a_short_form_never_shadows_a_full_keyword(self):
        registry = _library.derive_registry([_strategy("uvm", [("limit", "GPUMEM_UVM_LIMIT", ())]), _strategy("x", [("oom", "GPUMEM_X_OOM", ())])])
        self.assertEqual(registry.options["oom"], "GPUMEM_OOM")
        self.assertEqual(registry.options["x_oom"], "GPUMEM_X_OOM")


@unittest.skipUnless(HAVE_LIB, LIB_REASON)
class LibraryKeywordTests(unittest.TestCase):
    """The keywords of the library's registry, and the deprecated ones."""

    def test_every_variable_of_the_registry_has_its_keyword(self):
        registry = _library.registry()
        for strategy in gpumem_torch.strategies(all_registered=True):
            for option in strategy["options"]:
                if option["env"]:
                    keyword = option["env"][len("GPUMEM_") :].lower()
                    self.assertEqual(registry.options[keyword], option["env"])
                for older in option["envAliases"]:
                    self.assertEqual(registry.deprecated_options[older[len("GPUMEM_") :].lower()], option["env"])
        self.assertEqual(gpumem_torch.STRATEGIES, tuple(s["name"] for s in gpumem_torch.strategies()))

    def test_every_keyword_of_before_still_works(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            for keyword, variable in KEYWORDS_BEFORE.items():
                with self.subTest(keyword=keyword):
                    self.assertEqual(_library.option_values(None, {keyword: "x"}), {variable: "x"})

    def test_an_unknown_keyword_lists_the_known(self):
        with self.assertRaisesRegex(TypeError, "unknown option 'bogus'; known options: .*plugin_library"):
            _library.option_values("pool", {"bogus": 1})

    def test_native_and_native_library_are_deprecated_once_each(self):
        proc = run_process(
            "import json, gpumem_torch\n"
            "texts = [gpumem_torch.describe('native', native_library='/opt/slab.so') for _ in range(2)]\n"
            "texts.append(gpumem_torch.describe('plugin', library='/opt/slab.so'))\n"
            "print(json.dumps(texts))\n"
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(json.loads(proc.stdout), ["strategy=plugin plugin.library=/opt/slab.so plugin.options= oom=raise"] * 3)
        strategy_note = "FutureWarning: gpumem: the strategy name 'native' is deprecated and will be removed in the next release; use 'plugin'"
        option_note = "FutureWarning: gpumem: the option 'native_library' is deprecated and will be removed in the next release; use 'plugin_library'"
        self.assertEqual(proc.stderr.count(strategy_note), 1, proc.stderr)
        self.assertEqual(proc.stderr.count(option_note), 1, proc.stderr)
        # Said at the caller's line (the third of the program), not inside the package.
        self.assertIn("<string>:3: " + strategy_note, proc.stderr)

    def test_the_deprecated_name_warns_through_the_warnings_module(self):
        _library._warned.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertEqual(_library.option_values("NATIVE", {}), {"GPUMEM_ALLOCATOR": "plugin"})
        self.assertEqual([w.category for w in caught], [FutureWarning])
        self.assertIn("'native' is deprecated", str(caught[0].message))
        self.assertEqual(caught[0].filename, __file__)
        _library._warned.clear()


class MissingLibraryTests(unittest.TestCase):
    """Where the library is missing, the package imports, and what needs the registry says where it
    looked (FileNotFoundError), as loading always has."""

    def test_missing_library(self):
        proc = run_process(
            "import json, gpumem_torch\n"
            "out = {}\n"
            "for name, call in [('STRATEGIES', lambda: gpumem_torch.STRATEGIES), ('describe', lambda: gpumem_torch.describe('pool')),\n"
            "                   ('check_config', lambda: gpumem_torch.check_config('pool', max_reserved='1GiB'))]:\n"
            "    try:\n"
            "        call()\n"
            "    except FileNotFoundError as e:\n"
            "        out[name] = str(e)\n"
            "print(json.dumps(out))\n",
            GPUMEM_TORCH_LIB="/nonexistent/libgpumem_torch.so",
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertEqual(set(out), {"STRATEGIES", "describe", "check_config"})
        for message in out.values():
            self.assertIn("libgpumem_torch.so not found. Looked at: /nonexistent/libgpumem_torch.so ($GPUMEM_TORCH_LIB)", message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
