// The strategy registry (gpumem/strategy_registry.hpp) and libgpumem_torch's configuration, which
// reads it (src/torch/config.cpp, no CUDA): every descriptor is complete and parses its own defaults,
// bad values and unknown keys are errors naming the key, the chain builder takes every registered
// name, and GPUMEM_ALLOCATOR accepts exactly the registered names whose memory kernels can use (and
// their older names, the aliases, with a warning).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

#include "config.hpp"
#include "gpumem/chain_builder.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/pinned_host_resource.hpp"
#include "gpumem/plugin_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "gpumem/strategy_registry.hpp"
#include "gpumem/tiered_resource.hpp"
#include "gpumem/uvm_resource.hpp"

using namespace gpumem;

namespace {

// A torch configuration from `vars` (nothing else is read); "" when valid, else the error.
std::string torch_config(const std::map<std::string, std::string>& vars, torch::config* out = nullptr) {
  torch::config c;
  std::string error;
  auto reader = [&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  if (!torch::parse_config(reader, c, error)) return error.empty() ? "(no message)" : error;
  if (out) *out = c;
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A strategy's name or alias is one lower-case word: a GPUMEM_ALLOCATOR value and part of variable names.
bool is_word(const std::string& name) {
  return !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos;
}

}  // namespace

TEST_CASE("registry lists the strategies of GPUMEM_STRATEGIES in order") {
  // The list expanded twice: each entry's descriptor function and its name as written there.
#define GPUMEM_TEST_DESCRIPTOR(name) &name##_strategy(),
#define GPUMEM_TEST_NAME(name) #name,
  const std::vector<const strategy_descriptor*> listed{GPUMEM_STRATEGIES(GPUMEM_TEST_DESCRIPTOR)};
  const std::vector<std::string> listed_names{GPUMEM_STRATEGIES(GPUMEM_TEST_NAME)};
#undef GPUMEM_TEST_DESCRIPTOR
#undef GPUMEM_TEST_NAME
  REQUIRE(!listed.empty());
  REQUIRE_EQ(strategies().size(), listed.size());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    CAPTURE(i);
    CHECK(strategies()[i] == listed[i]);
    CHECK_EQ(strategies()[i]->name, listed_names[i]);  // X(name) declares name_strategy(), named name
  }
  // Each name and each alias (an older name, still accepted) finds its strategy, and no other.
  std::set<std::string> names;
  for (const strategy_descriptor* d : strategies()) {
    std::vector<std::string> own{d->name};
    own.insert(own.end(), d->aliases.begin(), d->aliases.end());
    for (const std::string& name : own) {
      CAPTURE(name);
      CHECK(names.insert(name).second);  // no name twice
      CHECK(is_word(name));
      CHECK(find_strategy(name) == d);
      CHECK(&parse_strategy(name) == d);
      chain_spec spec;
      spec.strategy = name;
      CHECK(&strategy_of(spec) == d);
    }
  }
  CHECK(find_strategy("managed") == nullptr);
  CHECK(find_strategy("") == nullptr);
}

TEST_CASE("every descriptor is complete") {
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    CHECK(!d->description.empty());
    CHECK((d->leaf_name != nullptr));
    CHECK((d->make_leaf != nullptr));
    // A cache or adaptor has a layer of its own over the leaf, and says what it wraps.
    if (d->layer != strategy_layer::leaf) {
      CHECK((d->layer_name != nullptr));
      CHECK((d->make_layer != nullptr));
      CHECK(!d->wraps.empty());
    }
    // A strategy with options names the type a chain_spec holds them in.
    CHECK_EQ(d->options.empty(), d->options_type == nullptr);
    std::set<std::string> keys;
    for (const option_descriptor& o : d->options) {
      CAPTURE(o.key);
      CHECK(keys.insert(o.key).second);  // no key twice
      CHECK(!o.help.empty());
      CHECK(static_cast<bool>(o.apply));
      CHECK(static_cast<bool>(o.read));
      CHECK(o.fronts != 0);
      if (o.kind == option_kind::choice) CHECK(!o.choices.empty());
      if (o.required) CHECK(!o.required_form.empty());
      if (o.fronts & front_env) CHECK(!o.env.empty());
    }
  }
}

TEST_CASE("every descriptor parses its defaults") {
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    chain_spec defaults;
    defaults.strategy = d->name;
    for (const option_descriptor& o : d->options) {
      CAPTURE(o.key);
      const option_value before = o.read(defaults);
      if (o.default_text.empty()) {
        // No default value: the option is unset until given.
        CHECK(std::holds_alternative<std::monostate>(before));
        continue;
      }
      option_value v;
      REQUIRE(parse_option_text(o, o.default_text, v));
      // The default, applied, is what a spec holds before anything is given.
      chain_spec applied = defaults;
      o.apply(applied, v);
      REQUIRE(d->options_type != nullptr);
      CHECK(applied.options_type() == *d->options_type);  // the descriptor's own options type
      CHECK(!defaults.has_options());
      CHECK_EQ(option_text(o.read(applied)), option_text(before));
      CHECK_EQ(option_text(v), option_text(before));
    }
    // The defaults make a valid spec (except where an option is required).
    bool needs_option = false;
    for (const option_descriptor& o : d->options) needs_option = needs_option || o.required;
    CHECK_EQ(needs_option, d->flags.requires_options);
    if (!needs_option) validate(defaults);
  }
}

TEST_CASE("text forms reject bad values") {
  const strategy_descriptor& pool = pool_strategy();
  const option_descriptor* max_reserved = pool.option("maxReservedBytes");
  REQUIRE(max_reserved != nullptr);
  option_value v;
  CHECK(parse_option_text(*max_reserved, "512MiB", v));
  CHECK_EQ(std::get<std::uint64_t>(v), std::uint64_t{512} << 20);
  CHECK(parse_option_text(*max_reserved, "0", v));  // 0: no cap, which is unset
  CHECK(std::holds_alternative<std::monostate>(v));
  for (const char* bad : {"12Q", "1.5", "-1", "lots", ""}) CHECK(!parse_option_text(*max_reserved, bad, v));
  CHECK(parse_option_text(*max_reserved, "1.5GiB", v));  // a fraction with a unit, as every size
  CHECK_EQ(std::get<std::uint64_t>(v), std::uint64_t{3} << 29);
  CHECK(contains(option_text_expected(*max_reserved), "(0: no cap)"));

  const option_descriptor* upstream = pool.option("upstream");
  REQUIRE(upstream != nullptr);
  CHECK(parse_option_text(*upstream, "HOST", v));
  CHECK_EQ(std::get<std::string>(v), std::string("host"));
  CHECK(!parse_option_text(*upstream, "pinned", v));
  CHECK_EQ(option_text_expected(*upstream), std::string("one of cuda, host"));

  const option_descriptor* prefetch = uvm_strategy().option("prefetchOnAllocate");
  REQUIRE(prefetch != nullptr);
  CHECK(!parse_option_text(*prefetch, "yes", v));
  CHECK(parse_option_text(*prefetch, "0", v));
  CHECK_EQ(std::get<bool>(v), false);

  const option_descriptor* gc = expandable_strategy().option("gcThreshold");
  REQUIRE(gc != nullptr);
  CHECK(parse_option_text(*gc, "0.5", v));
  CHECK(!parse_option_text(*gc, "half", v));
  CHECK(!parse_option_text(*gc, "inf", v));
}

TEST_CASE("bad option values are rejected naming the key") {
  // A value the descriptor's minimum forbids, set in C++ rather than through a front end.
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    for (const option_descriptor& o : d->options) {
      CAPTURE(o.key);
      if (o.kind != option_kind::bytes || o.minimum == 0) continue;
      chain_spec spec;
      spec.strategy = d->name;
      if (d->name == "pool") spec.options<pool_spec>().upstream = placement::host;
      if (d->name == "pinned") spec.options<pinned_spec>().upstream = pinned_upstream::host;
      o.apply(spec, std::uint64_t{0});
      if (std::holds_alternative<std::monostate>(o.read(spec))) continue;  // 0 means unset for this option
      try {
        validate(spec);
        CHECK(!"validate accepted 0");
      } catch (const invalid_argument& e) {
        CHECK_EQ(e.argument(), o.key);
        CHECK(contains(e.what(), o.key));
      }
    }
  }
  chain_spec e;
  e.strategy = "expandable";
  e.options<expandable_spec>().options.gc_threshold = 2;
  try {
    validate(e);
    CHECK(!"validate accepted gcThreshold 2");
  } catch (const invalid_argument& err) {
    CHECK_EQ(err.argument(), std::string("gcThreshold"));
  }
}

TEST_CASE("unknown strategy names the registered ones") {
  try {
    parse_strategy("managed");
    CHECK(!"parse_strategy accepted 'managed'");
  } catch (const invalid_argument& e) {
    CHECK_EQ(e.argument(), std::string("strategy"));
    for (const strategy_descriptor* d : strategies()) CHECK(contains(e.what(), "'" + d->name + "'"));
  }
}

TEST_CASE("chain layers follow the descriptors") {
  chain_spec s;
  s.strategy = "expandable";
  s.device = -1;  // the host twin
  s.limit_bytes = 1 << 20;
  auto layers = chain_layers(s);
  REQUIRE_EQ(layers.size(), std::size_t{3});
  CHECK_EQ(layers[0], std::string("mmap"));
  CHECK_EQ(layers[1], std::string("limit"));
  CHECK_EQ(layers[2], std::string("expandable"));
  s.peer_access = {1};
  try {
    validate(s);
    CHECK(!"peerAccess accepted over the host twin");
  } catch (const invalid_argument& e) {
    CHECK_EQ(e.argument(), std::string("peerAccess"));
  }
}

TEST_CASE("registry json lists every strategy") {
  const std::string json = strategies_json();
  CHECK_EQ(json.front(), '[');
  CHECK_EQ(json.back(), ']');
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    // Listed once, by its name, with its aliases.
    std::string aliases;
    for (const std::string& alias : d->aliases) {
      aliases += (aliases.empty() ? "\"" : ",\"") + alias + "\"";
      CHECK(!contains(json, "\"name\":\"" + alias + "\""));
    }
    CHECK(contains(json, "\"name\":\"" + d->name + "\",\"aliases\":[" + aliases + "]"));
    for (const option_descriptor& o : d->options) {
      CAPTURE(o.key);
      CHECK(contains(json, "\"key\":\"" + o.key + "\""));
      // The variable's older spellings, under the strategy's aliases.
      for (const std::string& old : option_env_aliases(*d, o)) CHECK(contains(json, "\"" + old + "\""));
    }
  }
  CHECK(contains(json, "\"env\":\"GPUMEM_POOL_MAX_RESERVED\""));
  CHECK(contains(json, "\"kernelMemory\":false"));
}

TEST_CASE("registry json gives every flag of GPUMEM_STRATEGY_FLAGS, and the flags' own list their docs") {
  const std::string json = strategies_json();
  const std::string flags = strategy_flags_json();
  CHECK_EQ(flags.front(), '[');
  CHECK_EQ(flags.back(), ']');
  std::size_t count = 0;
#define GPUMEM_FLAG_CHECK(member, key, front, doc)                                                     \
  ++count;                                                                                             \
  CHECK(contains(json, "\"" key "\":"));                                                                \
  CHECK(contains(flags, std::string("{\"key\":\"" key "\",\"js\":") + (((front) & front_js) ? "true" : "false"))); \
  CHECK(std::string(doc).size() > 10);
  GPUMEM_STRATEGY_FLAGS(GPUMEM_FLAG_CHECK)
#undef GPUMEM_FLAG_CHECK
  CHECK_EQ(count, 11u);
  // a flag's value is the descriptor's: 'host' alone has no kernel memory, 'expandable' sleeps
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    const std::size_t at = json.find("{\"name\":\"" + d->name + "\"");
    REQUIRE(at != std::string::npos);
    const std::string own = json.substr(at, json.find("\"options\"", at) - at);
    CHECK(contains(own, std::string("\"kernelMemory\":") + (d->flags.kernel_memory ? "true" : "false")));
    CHECK(contains(own, std::string("\"sleep\":") + (d->flags.sleep ? "true" : "false")));
  }
}

// --- libgpumem_torch's configuration --------------------------------------------------------------

TEST_CASE("torch accepts exactly the registered names") {
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    std::map<std::string, std::string> vars{{"GPUMEM_ALLOCATOR", d->name}};
    // A required option is given through its variable (today a library path: the one text option).
    for (const option_descriptor& o : d->options) {
      if (!o.required || !d->flags.kernel_memory) continue;
      REQUIRE(!o.env.empty());
      REQUIRE(o.kind == option_kind::text);
      vars[o.env] = "/lib/x.so";
    }
    torch::config c;
    const std::string error = torch_config(vars, &c);
    if (d->flags.kernel_memory) {
      CHECK_EQ(error, std::string(""));
      if (error.empty()) {
        CHECK(c.strategy == d);
        CHECK_EQ(c.spec.strategy, d->name);
        CHECK(contains(torch::describe(c), "strategy=" + d->name + " "));
        CHECK_EQ(c.warning, std::string(""));
      }
    } else {
      // Registered, but its memory is no use to CUDA kernels: rejected saying so.
      CHECK(contains(error, "GPUMEM_ALLOCATOR='" + d->name + "'"));
      CHECK(contains(error, "not usable by CUDA kernels"));
    }
    // An alias (an older name) is read as the name, with a warning naming what to write instead.
    for (const std::string& alias : d->aliases) {
      CAPTURE(alias);
      vars["GPUMEM_ALLOCATOR"] = alias;
      torch::config by_alias;
      const std::string alias_error = torch_config(vars, &by_alias);
      if (!d->flags.kernel_memory) {
        CHECK(contains(alias_error, "not usable by CUDA kernels"));
        continue;
      }
      CHECK_EQ(alias_error, std::string(""));
      if (!alias_error.empty()) continue;
      CHECK(by_alias.strategy == d);
      CHECK_EQ(by_alias.spec.strategy, d->name);
      CHECK(contains(by_alias.warning, "GPUMEM_ALLOCATOR=" + alias + " is deprecated"));
      CHECK(contains(by_alias.warning, "use GPUMEM_ALLOCATOR=" + d->name));
    }
  }
  // An unregistered name is told the names kernels can use, in the registry's order.
  std::string usable;
  for (const strategy_descriptor* d : strategies()) {
    if (d->flags.kernel_memory) usable += (usable.empty() ? "" : ", ") + d->name;
  }
  for (const char* name : {"bogus", "managed", "plugins", "pools"}) {
    CAPTURE(name);
    const std::string error = torch_config({{"GPUMEM_ALLOCATOR", name}});
    CHECK(contains(error, std::string("GPUMEM_ALLOCATOR='") + name + "'"));
    CHECK(contains(error, "one of " + usable + ", plugin:<path>"));
  }
  torch::config c;
  CHECK_EQ(torch_config({{"GPUMEM_ALLOCATOR", "UVM"}}, &c), std::string(""));
  CHECK_EQ(c.strategy->name, std::string("uvm"));
}

TEST_CASE("torch defaults and descriptions are unchanged") {
  torch::config c;
  REQUIRE_EQ(torch_config({}, &c), std::string(""));
  CHECK_EQ(torch::describe(c), std::string("strategy=expandable expandable.unmap_idle_before_growth=0 oom=raise"));
  REQUIRE_EQ(torch_config({{"GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH", "1"}}, &c), std::string(""));
  CHECK(c.spec.options<expandable_spec>().options.unmap_idle_before_growth);
  CHECK_EQ(torch::describe(c), std::string("strategy=expandable expandable.unmap_idle_before_growth=1 oom=raise"));
  // With GPUMEM_ALLOCATOR unset, another strategy's variable is refused rather than ignored.
  const std::string error = torch_config({{"GPUMEM_POOL_MAX_RESERVED", "1GiB"}});
  CHECK(contains(error, "GPUMEM_POOL_MAX_RESERVED='1GiB'"));
  CHECK(contains(error, "GPUMEM_ALLOCATOR=pool or pinned as well (GPUMEM_ALLOCATOR is unset, and the default strategy is expandable)"));
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "pool"}}, &c), std::string(""));
  CHECK_EQ(torch::describe(c), std::string("strategy=pool pool.upstream=cuda pool.max_reserved=none oom=raise"));
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "uvm"}, {"GPUMEM_UVM_LIMIT", "8GiB"}, {"GPUMEM_UVM_PREFETCH", "0"},
                           {"GPUMEM_UVM_ADVISE", "host"}},
                          &c),
             std::string(""));
  CHECK_EQ(torch::describe(c), "strategy=uvm uvm.prefetch=0 uvm.advise=host uvm.limit=" + std::to_string(8ull << 30) + " oom=raise");
  const chain_spec uvm = torch::chain_spec_for(c, 0, 0);
  CHECK(uvm.options<uvm_spec>().advice.preferred_location == placement_choice::host);
  CHECK(uvm.options<uvm_spec>().advice.accessed_by == placement_choice::device);
  CHECK(!uvm.options<uvm_spec>().prefetch_on_allocate);
  CHECK(uvm.limit_bytes.has_value());
  CHECK_EQ(uvm.limit_bytes.value_or(0), 8ull << 30);
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "tiered"}, {"GPUMEM_TIERED_DEVICE_BUDGET", "8GiB"},
                           {"GPUMEM_TIERED_PLACEMENT", "host"}},
                          &c),
             std::string(""));
  CHECK_EQ(torch::describe(c), "strategy=tiered tiered.device_budget=" + std::to_string(8ull << 30) +
                                   " tiered.host_budget=default tiered.placement=host oom=raise");
  CHECK(c.spec.options<tiered_spec>().options.placement == placement_choice::host);
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "pinned"}, {"GPUMEM_POOL_MAX_RESERVED", "1GiB"}}, &c), std::string(""));
  CHECK_EQ(torch::describe(c), "strategy=pinned pool.upstream=pinned pool.max_reserved=" + std::to_string(1ull << 30) + " oom=raise");
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "async"}}, &c), std::string(""));
  CHECK_EQ(torch::describe(c), std::string("strategy=async async.release_threshold=keep-all oom=raise"));
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "expandable"}}, &c), std::string(""));
  CHECK_EQ(torch::describe(c), std::string("strategy=expandable expandable.unmap_idle_before_growth=0 oom=raise"));
  const std::vector<std::string> expandable_layers = chain_layers(torch::chain_spec_for(c, 0, 0));
  CHECK_EQ(expandable_layers.front(), std::string("vmm"));
  // The uvm limit from the device's free memory, less the margin.
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "uvm"}}, &c), std::string(""));
  const chain_spec free_limited = torch::chain_spec_for(c, 0, 4ull << 30);
  CHECK(free_limited.limit_bytes.has_value());
  CHECK_EQ(free_limited.limit_bytes.value_or(0), (4ull << 30) - torch::front_limit_free_margin);
}

TEST_CASE("torch bad values name the variable") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"GPUMEM_POOL_MAX_RESERVED", "12Q"}, {"GPUMEM_POOL_MAX_RESERVED", "-1"}, {"GPUMEM_ASYNC_RELEASE_THRESHOLD", "lots"},
      {"GPUMEM_UVM_PREFETCH", "yes"},      {"GPUMEM_UVM_ADVISE", "gpu"},       {"GPUMEM_UVM_LIMIT", "0"},
      {"GPUMEM_OOM", "ignore"},            {"GPUMEM_TIERED_DEVICE_BUDGET", "8G"}, {"GPUMEM_TIERED_PLACEMENT", "gpu"},
  };
  for (const auto& [name, value] : cases) {
    const std::string error = torch_config({{name, value}});
    CHECK(contains(error, name + "='" + value + "' is not valid: expected"));
  }
  CHECK(contains(torch_config({{"GPUMEM_POOL_MAX_RESERVED", "2MB"}}), "(0: no cap)"));
  // Another strategy's variable that means nothing without it.
  CHECK(contains(torch_config({{"GPUMEM_PLUGIN_LIBRARY", "/x.so"}}), "GPUMEM_PLUGIN_LIBRARY='/x.so' is not valid: expected GPUMEM_ALLOCATOR=plugin"));
  // ... also by its deprecated name, which the message keeps.
  CHECK(contains(torch_config({{"GPUMEM_NATIVE_LIBRARY", "/x.so"}}), "GPUMEM_NATIVE_LIBRARY='/x.so' is not valid: expected GPUMEM_ALLOCATOR=plugin"));
  CHECK(contains(torch_config({{"GPUMEM_PLUGIN_OPTIONS", "a=1"}}), "GPUMEM_PLUGIN_OPTIONS"));
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "plugin"}}),
                 "GPUMEM_ALLOCATOR=plugin needs GPUMEM_PLUGIN_LIBRARY=<path of a gpumem plug-in library>"));
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "native"}}),
                 "GPUMEM_ALLOCATOR=plugin needs GPUMEM_PLUGIN_LIBRARY=<path of a gpumem plug-in library>"));
}

TEST_CASE("torch plugin prefix and the native spellings are deprecated spellings of plugin") {
  torch::config c;
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "plugin:/Some/Lib.so"}, {"GPUMEM_PLUGIN_OPTIONS", "a=1"}}, &c), std::string(""));
  CHECK_EQ(c.strategy->name, std::string("plugin"));
  CHECK_EQ(c.spec.options<plugin_spec>().library, std::string("/Some/Lib.so"));  // the path keeps its case
  CHECK_EQ(c.spec.options<plugin_spec>().options, std::string("a=1"));
  CHECK(contains(c.warning, "deprecated"));
  CHECK_EQ(torch::describe(c), std::string("strategy=plugin plugin.library=/Some/Lib.so plugin.options=a=1 oom=raise"));
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "plugin:"}}), "plugin:<path of a gpumem plug-in library>"));
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "plugin:/a.so"}, {"GPUMEM_NATIVE_LIBRARY", "/b.so"}}),
                 "GPUMEM_NATIVE_LIBRARY='/b.so' is not valid"));
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "plugin:/a.so"}, {"GPUMEM_PLUGIN_LIBRARY", "/b.so"}}),
                 "GPUMEM_PLUGIN_LIBRARY='/b.so' is not valid"));
  // The current spellings: no warning.
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "plugin"}, {"GPUMEM_PLUGIN_LIBRARY", "/a.so"}}, &c), std::string(""));
  CHECK_EQ(c.spec.options<plugin_spec>().library, std::string("/a.so"));
  CHECK(c.warning.empty());
  // The older name and variable: read, each with a warning naming what to write instead.
  REQUIRE_EQ(torch_config({{"GPUMEM_ALLOCATOR", "native"}, {"GPUMEM_NATIVE_LIBRARY", "/a.so"}}, &c), std::string(""));
  CHECK_EQ(c.strategy->name, std::string("plugin"));
  CHECK_EQ(c.spec.options<plugin_spec>().library, std::string("/a.so"));
  CHECK(contains(c.warning, "GPUMEM_ALLOCATOR=native is deprecated"));
  CHECK(contains(c.warning, "GPUMEM_NATIVE_LIBRARY is deprecated and will be removed; use GPUMEM_PLUGIN_LIBRARY"));
  // Both spellings of one variable: one would be ignored, so neither is.
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "plugin"}, {"GPUMEM_PLUGIN_LIBRARY", "/a.so"}, {"GPUMEM_NATIVE_LIBRARY", "/b.so"}}),
                 "GPUMEM_NATIVE_LIBRARY='/b.so' is not valid: expected GPUMEM_PLUGIN_LIBRARY alone"));
}

TEST_CASE("torch variables come from the descriptors") {
  const std::vector<std::string>& vars = torch::config_variables();
  CHECK_EQ(vars.front(), std::string("GPUMEM_ALLOCATOR"));
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    for (const option_descriptor& o : d->options) {
      CAPTURE(o.key);
      if (!o.env.empty()) CHECK(std::find(vars.begin(), vars.end(), o.env) != vars.end());
      // The older spellings are still read, so they are still known.
      for (const std::string& old : option_env_aliases(*d, o)) CHECK(std::find(vars.begin(), vars.end(), old) != vars.end());
    }
  }
  std::vector<std::pair<std::string, std::string>> parsed;
  std::string error;
  CHECK(torch::parse_spec("GPUMEM_ALLOCATOR=tiered\nGPUMEM_TIERED_HOST_BUDGET=1GiB", parsed, error));
  CHECK(!torch::parse_spec("GPUMEM_BOGUS=1", parsed, error));
  CHECK(contains(error, "GPUMEM_TIERED_PLACEMENT"));
}

TEST_CASE("torch configuration text refuses a NUL rather than reading the value cut short") {
  std::vector<std::pair<std::string, std::string>> parsed;
  std::string error;
  const std::string value_nul("GPUMEM_ALLOCATOR=pool\nGPUMEM_POOL_MAX_RESERVED=8GiB\0junk\n", 57);
  REQUIRE_EQ(value_nul.size(), std::size_t(57));
  CHECK_FALSE(torch::parse_spec(value_nul, parsed, error));
  CHECK_EQ(error, std::string("GPUMEM_POOL_MAX_RESERVED='8GiB\\0junk' is not valid: a value cannot contain a NUL character "
                              "(it would be read cut short at it)"));
  const std::string name_nul("GPUMEM_ALLOCATOR=pool\nGPUMEM_POOL\0_MAX_RESERVED=8GiB", 52);
  CHECK_FALSE(torch::parse_spec(name_nul, parsed, error));
  CHECK(contains(error, "has a NUL character in its name"));
  const std::string trailing_nul("GPUMEM_ALLOCATOR=pool\0", 22);
  CHECK_FALSE(torch::parse_spec(trailing_nul, parsed, error));
  CHECK(contains(error, "GPUMEM_ALLOCATOR='pool\\0'"));
  // Without the NUL: accepted.
  CHECK(torch::parse_spec("GPUMEM_ALLOCATOR=pool\nGPUMEM_POOL_MAX_RESERVED=8GiB", parsed, error));
}

TEST_CASE("torch size variables name the binary spelling of a decimal-looking unit") {
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "pool"}, {"GPUMEM_POOL_MAX_RESERVED", "4GB"}}),
                 "GPUMEM_POOL_MAX_RESERVED='4GB' is not valid: expected"));
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "pool"}, {"GPUMEM_POOL_MAX_RESERVED", "4GB"}}), "; did you mean '4GiB'?"));
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "uvm"}, {"GPUMEM_UVM_LIMIT", "12g"}}), "; did you mean '12GiB'?"));
  CHECK(contains(torch_config({{"GPUMEM_ALLOCATOR", "tiered"}, {"GPUMEM_TIERED_DEVICE_BUDGET", "8G"}}), "did you mean '8GiB'?"));
  // Not a size: no hint.
  CHECK_FALSE(contains(torch_config({{"GPUMEM_UVM_ADVISE", "4GB"}}), "did you mean"));
  CHECK_FALSE(contains(torch_config({{"GPUMEM_ALLOCATOR", "pool"}, {"GPUMEM_POOL_MAX_RESERVED", "lots"}}), "did you mean"));
}
