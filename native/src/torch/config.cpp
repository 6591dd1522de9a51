#include "config.hpp"

#include <algorithm>
#include <cctype>
#include <variant>

#include "gpumem/sizes.hpp"
#include "text_lines.hpp"

namespace gpumem::torch {
namespace {

std::string size_expected() { return std::string("a size: ") + gpumem::size_form + ", e.g. 1073741824, 512MiB or 4GiB"; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// `text` with each NUL written \0, for a message.
std::string shown(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out;
}

std::string bad_value(const std::string& name, const std::string& value, const std::string& expected) {
  return name + "='" + value + "' is not valid: expected " + expected;
}

// The value of `name`, or nullopt where unset or empty.
std::optional<std::string> read(const env_reader& env, const std::string& name) {
  const char* v = env(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// A whole number from 0 to `max` in decimal digits (no sign, unit or spaces); false for anything else.
bool parse_count(const std::string& text, std::uint64_t max, std::uint64_t& out) {
  if (text.empty() || text.size() > 20) return false;
  std::uint64_t n = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return false;
    const std::uint64_t digit = static_cast<std::uint64_t>(ch - '0');
    if (n > (max - digit) / 10) return false;
    n = n * 10 + digit;
  }
  out = n;
  return true;
}

// "cuda, uvm, ...": the strategies GPUMEM_ALLOCATOR takes (those whose memory kernels can use).
std::string torch_strategy_names() {
  std::string names;
  for (const gpumem::strategy_descriptor* d : gpumem::strategies()) {
    if (d->flags.kernel_memory) names += (names.empty() ? "" : ", ") + d->name;
  }
  return names;
}

// "GPUMEM_ALLOCATOR=native" (or "native or pool") for the strategies with the variable `env`.
std::string strategies_with(const std::string& env) {
  std::string names;
  for (const gpumem::strategy_descriptor* d : gpumem::strategies()) {
    for (const gpumem::option_descriptor& o : d->options) {
      if (o.env == env && d->flags.kernel_memory) names += (names.empty() ? "" : " or ") + d->name;
    }
  }
  return "GPUMEM_ALLOCATOR=" + names;
}

// ", plugin:<path>": the strategies that an older GPUMEM_ALLOCATOR=<name>:<value> spelling still
// names (their descriptors' inline_option).
std::string inline_spellings() {
  std::string s;
  for (const gpumem::strategy_descriptor* d : gpumem::strategies()) {
    if (!d->inline_option.key.empty()) s += ", " + d->name + ":<" + d->inline_option.placeholder + ">";
  }
  return s;
}

// The strategy of GPUMEM_ALLOCATOR=<name>:<value> (lowercased `s`), where its descriptor keeps that
// older spelling; else nullptr.
const gpumem::strategy_descriptor* inline_spelling_strategy(const std::string& s) {
  const std::size_t colon = s.find(':');
  if (colon == std::string::npos) return nullptr;
  const std::string name = s.substr(0, colon);
  const gpumem::strategy_descriptor* d = gpumem::find_strategy(name);
  return d != nullptr && d->name == name && !d->inline_option.key.empty() ? d : nullptr;
}

void add_warning(config& c, const std::string& warning) { c.warning += (c.warning.empty() ? "" : "\n") + warning; }

// The variable that sets option `o` of strategy `d` as the environment gives it: its own name, or
// one of its deprecated names (a strategy alias's spelling: GPUMEM_NATIVE_LIBRARY). Both set is an
// error (`error` says which), since one of them would be ignored.
struct variable_read {
  std::string name;
  std::optional<std::string> value;
  bool deprecated = false;
};
bool read_option(const env_reader& env, const gpumem::strategy_descriptor& d, const gpumem::option_descriptor& o,
                 variable_read& out, std::string& error) {
  out = {o.env, read(env, o.env), false};
  for (const std::string& old : gpumem::option_env_aliases(d, o)) {
    const std::optional<std::string> v = read(env, old);
    if (!v) continue;
    if (out.value) {
      error = bad_value(old, *v, o.env + " alone (" + old + " is its deprecated name)");
      return false;
    }
    out = {old, v, true};
  }
  return true;
}

}  // namespace

const std::vector<std::string>& config_variables() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v{"GPUMEM_ALLOCATOR"};
    for (const gpumem::strategy_descriptor* d : gpumem::strategies()) {
      for (const gpumem::option_descriptor& o : d->options) {
        if (!o.env.empty() && std::find(v.begin(), v.end(), o.env) == v.end()) v.push_back(o.env);
      }
    }
    for (const gpumem::strategy_descriptor* d : gpumem::strategies()) {  // deprecated spellings, still read
      for (const gpumem::option_descriptor& o : d->options) {
        for (const std::string& old : gpumem::option_env_aliases(*d, o)) {
          if (std::find(v.begin(), v.end(), old) == v.end()) v.push_back(old);
        }
      }
    }
    for (const gpumem::strategy_descriptor* d : gpumem::strategies()) {
      const std::string& limit = d->front_limit.variable;
      if (!limit.empty() && std::find(v.begin(), v.end(), limit) == v.end()) v.push_back(limit);
    }
    v.emplace_back("GPUMEM_OOM");
    v.emplace_back("GPUMEM_OOM_WINDOW");
    v.emplace_back("GPUMEM_OOM_REPLAY_MS");
    return v;
  }();
  return names;
}

bool parse_spec(const std::string& spec, std::vector<std::pair<std::string, std::string>>& out, std::string& error) {
  out.clear();
  const std::vector<std::string>& variables = config_variables();
  for (const std::string& line : non_empty_lines(spec)) {
    const std::size_t eq = line.find('=');
    if (line.find('\0') != std::string::npos) {
      // The value is read as a C string: it would be cut short at the NUL ('8GiB\0junk' read as 8GiB).
      error = eq == std::string::npos || line.find('\0') < eq
                  ? "configuration line '" + shown(line) + "' has a NUL character in its name"
                  : line.substr(0, eq) + "='" + shown(line.substr(eq + 1)) +
                        "' is not valid: a value cannot contain a NUL character (it would be read cut short at it)";
      return false;
    }
    if (eq == std::string::npos || eq == 0) {
      error = "configuration line '" + line + "' is not NAME=value";
      return false;
    }
    const std::string name = line.substr(0, eq);
    if (std::find(variables.begin(), variables.end(), name) == variables.end()) {
      std::string names;
      for (const std::string& v : variables) names += (names.empty() ? "" : ", ") + v;
      error = "configuration line '" + line + "' names no setting of libgpumem_torch (expected one of " + names + ")";
      return false;
    }
    for (const auto& kv : out) {
      if (kv.first == name) {
        error = "configuration names " + name + " twice";
        return false;
      }
    }
    out.emplace_back(name, line.substr(eq + 1));
  }
  return true;
}

bool parse_config(const env_reader& env, config& out, std::string& error) {
  config c;
  // The default, expandable: it reserved the least at PyTorch's step time in every program of
  // bench/torch-live (docs/torch.md, "The default: expandable").
  c.strategy = &gpumem::expandable_strategy();
  const std::optional<std::string> allocator = read(env, "GPUMEM_ALLOCATOR");
  const bool defaulted = !allocator;
  std::string inline_value;  // GPUMEM_ALLOCATOR=<name>:<value> (plugin:PATH)
  if (const auto& v = allocator) {
    const std::string s = lower(*v);
    const gpumem::strategy_descriptor* d = nullptr;
    if ((d = inline_spelling_strategy(s)) != nullptr) {  // the older spelling; the value keeps its case
      const gpumem::option_descriptor& o = *d->option(d->inline_option.key);
      const std::string form = d->name + ":<" + d->inline_option.placeholder + ">";
      inline_value = v->substr(d->name.size() + 1);
      if (inline_value.empty()) {
        error = bad_value("GPUMEM_ALLOCATOR", *v, d->name + ":" + o.required_form);
        return false;
      }
      add_warning(c, "gpumem: GPUMEM_ALLOCATOR=" + form + " is deprecated and will be removed; use GPUMEM_ALLOCATOR=" + d->name +
                         " with " + o.env + "=<" + d->inline_option.placeholder + ">");
    } else {
      d = gpumem::find_strategy(s);
      if (d != nullptr && d->name != s) {  // an alias: the strategy's older name
        add_warning(c, "gpumem: GPUMEM_ALLOCATOR=" + s + " is deprecated and will be removed; use GPUMEM_ALLOCATOR=" + d->name);
      }
    }
    if (d == nullptr || !d->flags.kernel_memory) {
      std::string expected = "one of " + torch_strategy_names() + inline_spellings();
      if (d != nullptr) expected += " ('" + d->name + "' memory is not usable by CUDA kernels)";
      error = bad_value("GPUMEM_ALLOCATOR", *v, expected);
      return false;
    }
    c.strategy = d;
  }
  c.spec.strategy = c.strategy->name;
  // Every strategy's variables are checked, whichever strategy is chosen; the chosen one's are applied.
  const auto chosen_reads = [&c](const std::string& variable) {
    for (const gpumem::option_descriptor& co : c.strategy->options) {
      if (co.env == variable) return true;
    }
    return false;
  };
  for (const gpumem::strategy_descriptor* d : gpumem::strategies()) {
    for (const gpumem::option_descriptor& o : d->options) {
      if (o.env.empty()) continue;
      variable_read r;
      if (!read_option(env, *d, o, r, error)) return false;
      const std::optional<std::string>& v = r.value;
      const bool mine = d == c.strategy;
      if (!v) continue;
      if (o.env_strict && !mine && !chosen_reads(o.env)) {
        // Another strategy's variable that means nothing without it.
        error = bad_value(r.name, *v, strategies_with(o.env) + " as well");
        return false;
      }
      gpumem::option_value value;
      if (!gpumem::parse_option_text(o, *v, value)) {
        error = bad_value(r.name, *v, gpumem::option_text_expected(o));
        if (o.kind == gpumem::option_kind::bytes) error += gpumem::size_unit_hint(*v);
        return false;
      }
      if (defaulted && !mine && !chosen_reads(o.env)) {
        // Another strategy's variable with GPUMEM_ALLOCATOR unset: the process meant that strategy
        // (pool's, the default before expandable), and silently ignoring the setting would hide it.
        error = bad_value(r.name, *v,
                          strategies_with(o.env) + " as well (GPUMEM_ALLOCATOR is unset, and the default strategy is " +
                              c.strategy->name + ")");
        return false;
      }
      if (r.deprecated && (mine || chosen_reads(o.env))) {
        add_warning(c, "gpumem: " + r.name + " is deprecated and will be removed; use " + o.env);
      }
      if (mine && !std::holds_alternative<std::monostate>(value)) o.apply(c.spec, value);
    }
  }
  if (!inline_value.empty()) {
    const gpumem::option_descriptor& inline_option = *c.strategy->option(c.strategy->inline_option.key);
    variable_read r;
    if (!read_option(env, *c.strategy, inline_option, r, error)) return false;
    if (r.value) {
      error = bad_value(r.name, *r.value,
                        "GPUMEM_ALLOCATOR=" + c.strategy->name + " (" + c.strategy->name + ":<" + c.strategy->inline_option.placeholder +
                            "> names the " + c.strategy->inline_option.key + " itself)");
      return false;
    }
    inline_option.apply(c.spec, std::string(inline_value));
  }
  for (const gpumem::option_descriptor& o : c.strategy->options) {
    if (o.required && std::holds_alternative<std::monostate>(o.read(c.spec))) {
      error = "GPUMEM_ALLOCATOR=" + c.strategy->name + " needs " + o.env + "=" + o.required_form;
      if (c.strategy->inline_option.key == o.key) {
        error += " (or GPUMEM_ALLOCATOR=" + c.strategy->name + ":<" + c.strategy->inline_option.placeholder + ">)";
      }
      return false;
    }
  }
  // Every strategy's limit variable is checked, as its options are; the chosen strategy's is kept.
  for (const gpumem::strategy_descriptor* d : gpumem::strategies()) {
    const std::string& name = d->front_limit.variable;
    auto v = name.empty() ? std::nullopt : read(env, name);
    if (!v) continue;
    const std::string s = lower(*v);
    limit_mode mode = limit_mode::bytes;
    std::uint64_t bytes = 0;
    if (s == "free") mode = limit_mode::free_memory;
    else if (s == "none") mode = limit_mode::none;
    else if (!gpumem::try_parse_size(*v, bytes) || bytes == 0) {
      error = bad_value(name, *v, "'free', 'none' or a positive " + size_expected()) + gpumem::size_unit_hint(*v);
      return false;
    }
    if (d == c.strategy) {
      c.front_limit = mode;
      c.front_limit_bytes = bytes;
    }
  }
  if (auto v = read(env, "GPUMEM_OOM")) {
    std::string s = lower(*v);
    if (s == "raise") c.oom = oom_mode::raise;
    else if (s == "null") c.oom = oom_mode::null;
    else {
      error = bad_value("GPUMEM_OOM", *v, "raise or null");
      return false;
    }
  }
  if (auto v = read(env, "GPUMEM_OOM_WINDOW")) {
    if (!parse_count(*v, max_oom_window, c.oom_window)) {
      error = bad_value("GPUMEM_OOM_WINDOW", *v,
                        "a number of events from 0 (off) to " + std::to_string(max_oom_window) + ", e.g. 65536");
      return false;
    }
  }
  if (auto v = read(env, "GPUMEM_OOM_REPLAY_MS")) {
    if (!parse_count(*v, max_oom_replay_ms, c.oom_replay_ms)) {
      error = bad_value("GPUMEM_OOM_REPLAY_MS", *v,
                        "milliseconds from 0 (no replay) to " + std::to_string(max_oom_replay_ms) + ", e.g. 250");
      return false;
    }
  }
  out = c;
  return true;
}

gpumem::chain_spec chain_spec_for(const config& c, int device, std::uint64_t free_bytes) {
  gpumem::chain_spec spec = c.spec;
  spec.device = device;
  if (!c.strategy->front_limit.variable.empty()) {  // a limit layer under the strategy's user
    if (c.front_limit == limit_mode::bytes) {
      spec.limit_bytes = c.front_limit_bytes;
    } else if (c.front_limit == limit_mode::free_memory) {
      const std::uint64_t limit =
          free_bytes > front_limit_free_margin ? free_bytes - front_limit_free_margin : free_bytes / 2;
      if (limit != 0) spec.limit_bytes = limit;
    }
  }
  return spec;
}

std::string describe(const config& c) {
  std::string s = "strategy=" + c.strategy->name;
  for (const gpumem::option_descriptor& o : c.strategy->options) {
    if (o.label.empty()) continue;
    const gpumem::option_value v = o.read(c.spec);
    s += " " + o.label + "=" + (std::holds_alternative<std::monostate>(v) ? o.unset_text : gpumem::option_text(v));
  }
  if (!c.strategy->front_limit.variable.empty()) {
    s += " " + c.strategy->front_limit.label + "=";
    if (c.front_limit == limit_mode::free_memory) s += "free";
    else if (c.front_limit == limit_mode::none) s += "none";
    else s += std::to_string(c.front_limit_bytes);
  }
  s += std::string(" oom=") + (c.oom == oom_mode::raise ? "raise" : "null");
  return s;
}

}  // namespace gpumem::torch
