// The strategy registry (gpumem/strategy_registry.hpp): the descriptors collected and checked once,
// looked up by name or alias, their options parsed from text, and serialised as JSON for the front
// ends (the N-API addon, libgpumem_torch, code generation).
#include "gpumem/strategy_registry.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpumem/errors.hpp"
#include "gpumem/sizes.hpp"

namespace gpumem {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// ["a","b"]
std::string json_strings(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + json_string(items[i]);
  return out + "]";
}

// A value as JSON: null where unset.
std::string json_value(const option_value& v) {
  if (std::holds_alternative<std::uint64_t>(v)) return std::to_string(std::get<std::uint64_t>(v));
  if (std::holds_alternative<bool>(v)) return std::get<bool>(v) ? "true" : "false";
  if (std::holds_alternative<double>(v)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", std::get<double>(v));
    return buf;
  }
  if (std::holds_alternative<std::string>(v)) return json_string(std::get<std::string>(v));
  return "null";
}

// Checks the registry once: names and aliases are unique, every strategy can build its leaf.
std::vector<const strategy_descriptor*> collect() {
  std::vector<const strategy_descriptor*> all;
#define GPUMEM_COLLECT_STRATEGY(name) all.push_back(&name##_strategy());
  GPUMEM_STRATEGIES(GPUMEM_COLLECT_STRATEGY)
#undef GPUMEM_COLLECT_STRATEGY
  std::vector<std::string> names;
  for (const strategy_descriptor* d : all) {
    if (!d->leaf_name || !d->make_leaf) throw invalid_state("strategy '" + d->name + "' has no leaf");
    if (d->flags.address_only != (d->make_address_only_leaf != nullptr))
      throw invalid_state("strategy '" + d->name + "' must set both the address_only flag and make_address_only_leaf, or neither");
    std::vector<std::string> own{d->name};
    own.insert(own.end(), d->aliases.begin(), d->aliases.end());
    for (const std::string& name : own) {
      for (const std::string& taken : names) {
        if (name == taken) throw invalid_state("strategy name '" + name + "' is registered twice");
      }
      names.push_back(name);
    }
  }
  return all;
}

}  // namespace

const char* option_kind_name(option_kind kind) noexcept {
  switch (kind) {
    case option_kind::bytes: return "bytes";
    case option_kind::count: return "count";
    case option_kind::boolean: return "boolean";
    case option_kind::choice: return "choice";
    case option_kind::number: return "number";
    case option_kind::text: return "text";
  }
  return "text";
}

const char* strategy_layer_name(strategy_layer layer) noexcept {
  switch (layer) {
    case strategy_layer::leaf: return "leaf";
    case strategy_layer::cache: return "cache";
    case strategy_layer::adaptor: return "adaptor";
  }
  return "leaf";
}

const option_descriptor* strategy_descriptor::option(std::string_view key) const noexcept {
  for (const option_descriptor& o : options) {
    if (o.key == key) return &o;
  }
  return nullptr;
}

std::string strategy_descriptor::option_keys(unsigned front) const {
  std::string list;
  for (const option_descriptor& o : options) {
    if (o.fronts & front) list += (list.empty() ? "" : ", ") + o.key;
  }
  return list;
}

const std::vector<const strategy_descriptor*>& strategies() {
  static const std::vector<const strategy_descriptor*> all = collect();
  return all;
}

const strategy_descriptor* find_strategy(std::string_view name) noexcept {
  for (const strategy_descriptor* d : strategies()) {
    if (d->name == name) return d;
  }
  for (const strategy_descriptor* d : strategies()) {
    for (const std::string& alias : d->aliases) {
      if (alias == name) return d;
    }
  }
  return nullptr;
}

std::vector<std::string> option_env_aliases(const strategy_descriptor& strategy, const option_descriptor& option) {
  std::vector<std::string> names;
  const std::string prefix = "GPUMEM_" + upper(strategy.name) + "_";
  if (option.env.compare(0, prefix.size(), prefix) != 0) return names;
  for (const std::string& alias : strategy.aliases) names.push_back("GPUMEM_" + upper(alias) + "_" + option.env.substr(prefix.size()));
  return names;
}

const strategy_descriptor& parse_strategy(std::string_view name) {
  if (const strategy_descriptor* d = find_strategy(name)) return *d;
  std::string list;
  for (const strategy_descriptor* d : strategies()) list += (list.empty() ? "'" : ", '") + d->name + "'";
  throw invalid_argument(invalid_argument::kind::type, "strategy",
                         "Expected one of " + list + " for strategy but received '" + std::string(name) + "'");
}

const strategy_descriptor& strategy_of(const chain_spec& spec) { return parse_strategy(spec.strategy); }

bool parse_option_text(const option_descriptor& option, const std::string& text, option_value& out) {
  switch (option.kind) {
    case option_kind::bytes:
    case option_kind::count: {
      std::uint64_t v = 0;
      if (option.kind == option_kind::bytes) {
        if (!try_parse_size(text, v)) return false;
      } else {
        if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos) return false;
        v = std::stoull(text);
      }
      if (v == 0 && !option.env_zero_means.empty()) {
        out = std::monostate{};
        return true;
      }
      if (v < option.minimum) return false;
      out = v;
      return true;
    }
    case option_kind::boolean:
      if (text != "0" && text != "1") return false;
      out = text == "1";
      return true;
    case option_kind::choice: {
      const std::string l = lower(text);
      for (const std::string& c : option.choices) {
        if (c == l) {
          out = c;
          return true;
        }
      }
      return false;
    }
    case option_kind::number: {
      char* end = nullptr;
      const double d = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(d)) return false;
      out = d;
      return true;
    }
    case option_kind::text: out = text; return true;
  }
  return false;
}

std::string option_text_expected(const option_descriptor& option) {
  switch (option.kind) {
    case option_kind::bytes: {
      std::string s = std::string(option.minimum >= 1 && option.env_zero_means.empty() ? "a positive size: " : "a size: ") +
                      size_form + ", e.g. 1073741824, 512MiB or 4GiB";
      if (!option.env_zero_means.empty()) s += " (0: " + option.env_zero_means + ")";
      return s;
    }
    case option_kind::count: return option.minimum >= 1 ? "a positive integer" : "a non-negative integer";
    case option_kind::boolean: return "0 or 1";
    case option_kind::choice: {
      std::string s = "one of ";
      for (std::size_t i = 0; i < option.choices.size(); ++i) s += (i ? ", " : "") + option.choices[i];
      return s;
    }
    case option_kind::number: return "a finite number";
    case option_kind::text: return "text";
  }
  return "text";
}

std::string option_text(const option_value& value) {
  if (std::holds_alternative<std::uint64_t>(value)) return std::to_string(std::get<std::uint64_t>(value));
  if (std::holds_alternative<bool>(value)) return std::get<bool>(value) ? "1" : "0";
  if (std::holds_alternative<double>(value)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", std::get<double>(value));
    return buf;
  }
  if (std::holds_alternative<std::string>(value)) return std::get<std::string>(value);
  return "";
}

std::string strategies_json() {
  std::string out = "[";
  bool first = true;
  for (const strategy_descriptor* d : strategies()) {
    out += first ? "" : ",";
    first = false;
    const strategy_flags& f = d->flags;
    out += "{\"name\":" + json_string(d->name) + ",\"aliases\":" + json_strings(d->aliases) +
           ",\"description\":" + json_string(d->description) +
           ",\"layer\":" + json_string(strategy_layer_name(d->layer)) + ",\"wraps\":" + json_string(d->wraps) +
           ",\"flags\":{";
    bool first_flag = true;
#define GPUMEM_FLAG_JSON(member, key, front, doc)                        \
  out += std::string(first_flag ? "" : ",") + "\"" key "\":" + (f.member ? "true" : "false"); \
  first_flag = false;
    GPUMEM_STRATEGY_FLAGS(GPUMEM_FLAG_JSON)
#undef GPUMEM_FLAG_JSON
    out += "},\"options\":[";
    bool first_option = true;
    for (const option_descriptor& o : d->options) {
      out += first_option ? "" : ",";
      first_option = false;
      option_value def;
      if (!o.default_text.empty() && !parse_option_text(o, o.default_text, def)) def = std::monostate{};
      out += "{\"key\":" + json_string(o.key) + ",\"kind\":" + json_string(option_kind_name(o.kind)) +
             ",\"minimum\":" + std::to_string(o.minimum) + ",\"choices\":" + json_strings(o.choices) + ",\"default\":" + json_value(def) +
             ",\"required\":" + (o.required ? "true" : "false") + ",\"help\":" + json_string(o.help) +
             ",\"doc\":" + json_string(o.doc) + ",\"placement\":" + (o.placement ? "true" : "false") +
             ",\"js\":" + ((o.fronts & front_js) ? "true" : "false") +
             ",\"env\":" + (o.env.empty() ? std::string("null") : json_string(o.env)) +
             ",\"envAliases\":" + json_strings(option_env_aliases(*d, o)) + "}";
    }
    out += "]}";
  }
  return out + "]";
}

std::string strategy_flags_json() {
  std::string out = "[";
#define GPUMEM_FLAG_SCHEMA(member, key, front, doc)                                                        \
  out += std::string(out.size() > 1 ? "," : "") + "{\"key\":\"" key "\",\"js\":" + ((front) & front_js ? "true" : "false") + \
         ",\"doc\":" + json_string(doc) + "}";
  GPUMEM_STRATEGY_FLAGS(GPUMEM_FLAG_SCHEMA)
#undef GPUMEM_FLAG_SCHEMA
  return out + "]";
}

}  // namespace gpumem
