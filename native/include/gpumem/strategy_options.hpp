// A strategy descriptor's options (strategy_registry.hpp), one line each. A factory makes the option
// over a member of the strategy's options struct, reached through one or more member pointers; the
// chained calls say what differs from the defaults (a positive minimum, the libgpumem_torch variable,
// the Node binding only, ...):
//
//   bytes_option<&pool_spec::options, &pool_options::max_reserved_bytes>("maxReservedBytes", "the most bytes ...")
//       .positive().unset_at(0).env("GPUMEM_POOL_MAX_RESERVED", "pool.max_reserved").zero_means("no cap")
//
// The factory writes the option's apply and read (the member's type decides how a value is stored:
// an integer, a bool, a double, a string that is unset when empty, a std::optional that is unset when
// empty, an enum through a choice's names), and its default is the options struct's own, read from a
// default-constructed struct, so that a default is written once. The option's kind and the member's
// type must agree (static_assert).
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gpumem/strategy_registry.hpp"

namespace gpumem {

// An option being declared; converts to the option_descriptor a strategy_descriptor lists.
class option_builder {
 public:
  using apply_fn = std::function<void(chain_spec& spec, const option_value& value)>;
  using read_fn = std::function<option_value(const chain_spec& spec)>;

  // An option with its own apply and read (the factories below cover a member of the options struct).
  option_builder(std::string key, option_kind kind, std::string help, apply_fn apply, read_fn read) {
    o_.key = std::move(key);
    o_.kind = kind;
    o_.help = std::move(help);
    o_.apply = std::move(apply);
    o_.read = std::move(read);
  }

  // choice: the accepted values, in the order messages list them.
  option_builder& choices(std::vector<std::string> values) {
    o_.choices = std::move(values);
    return *this;
  }
  // bytes/count: the smallest value accepted; positive() is minimum(1).
  option_builder& minimum(std::uint64_t value) {
    o_.minimum = value;
    return *this;
  }
  option_builder& positive() { return minimum(1); }
  // Where it may be given: the Node binding's spec only, libgpumem_torch's environment only (default both).
  option_builder& js_only() {
    o_.fronts = front_js;
    return *this;
  }
  option_builder& env_only() {
    o_.fronts = front_env;
    return *this;
  }
  // libgpumem_torch: the variable that sets it, and the label describe() shows it under.
  option_builder& env(std::string variable, std::string label) {
    o_.env = std::move(variable);
    o_.label = std::move(label);
    return *this;
  }
  // libgpumem_torch's describe() label of an option it takes no variable for.
  option_builder& label(std::string label) {
    o_.label = std::move(label);
    return *this;
  }
  // What describe() shows while it is unset (default "default").
  option_builder& unset_text(std::string text) {
    o_.unset_text = std::move(text);
    return *this;
  }
  // The variable takes 0 for unset, which means `meaning` ("no cap").
  option_builder& zero_means(std::string meaning) {
    o_.env_zero_means = std::move(meaning);
    return *this;
  }
  // The variable is an error unless GPUMEM_ALLOCATOR names a strategy that has it.
  option_builder& strict() {
    o_.env_strict = true;
    return *this;
  }
  // Must be given; `form` shows what it looks like.
  option_builder& required(std::string form) {
    o_.required = true;
    o_.required_form = std::move(form);
    return *this;
  }
  // The member holds `sentinel` while unset (0, or the largest value): read gives monostate for it.
  option_builder& unset_at(std::uint64_t sentinel) {
    o_.read = [read = std::move(o_.read), sentinel](const chain_spec& spec) -> option_value {
      option_value v = read(spec);
      if (std::holds_alternative<std::uint64_t>(v) && std::get<std::uint64_t>(v) == sentinel) return std::monostate{};
      return v;
    };
    return *this;
  }
  // After the value is set: `then` derives what follows from it (e.g. a second member).
  option_builder& and_then(void (*then)(chain_spec& spec)) {
    o_.apply = [apply = std::move(o_.apply), then](chain_spec& spec, const option_value& v) {
      apply(spec, v);
      then(spec);
    };
    return *this;
  }
  // The longer documentation (the TypeScript options' TSDoc); the one-line help where none is given.
  option_builder& doc(std::string text) {
    o_.doc = std::move(text);
    return *this;
  }
  // A choice that says where the memory is (option_descriptor::placement).
  option_builder& placement() {
    o_.placement = true;
    return *this;
  }

  // The descriptor, its default read from the options struct's defaults.
  operator option_descriptor() const {
    option_descriptor o = o_;
    o.default_text = option_text(o.read(chain_spec{}));
    return o;
  }

 private:
  option_descriptor o_;
};

namespace detail::options {

template <class M>
struct member_pointer;
template <class C, class T>
struct member_pointer<T C::*> {
  using owner = C;
};

// The member First (of the strategy's options struct), then Rest inside it, in a chain_spec.
template <auto First, auto... Rest>
struct field {
  using spec_type = typename member_pointer<decltype(First)>::owner;
  static auto& get(chain_spec& spec) { return ((spec.options<spec_type>().*First) .* ... .* Rest); }
  static const auto& get(const chain_spec& spec) { return ((spec.options<spec_type>().*First) .* ... .* Rest); }
  using type = std::remove_cv_t<std::remove_reference_t<decltype(get(std::declval<chain_spec&>()))>>;
};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <class T>
void assign(T& member, const option_value& v) {
  if constexpr (is_optional<T>::value) {
    typename T::value_type inner{};
    assign(inner, v);
    member = inner;
  } else if constexpr (std::is_same_v<T, bool>) {
    member = std::get<bool>(v);
  } else if constexpr (std::is_integral_v<T>) {
    member = static_cast<T>(std::get<std::uint64_t>(v));
  } else if constexpr (std::is_floating_point_v<T>) {
    member = static_cast<T>(std::get<double>(v));
  } else {
    member = std::get<std::string>(v);
  }
}

template <class T>
option_value value_of(const T& member) {
  if constexpr (is_optional<T>::value) {
    if (!member) return std::monostate{};
    return value_of(*member);
  } else if constexpr (std::is_same_v<T, bool>) {
    return member;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<std::uint64_t>(member);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<double>(member);
  } else {
    if (member.empty()) return std::monostate{};
    return member;
  }
}

template <class T>
struct plain {
  using type = T;
};
template <class T>
struct plain<std::optional<T>> {
  using type = T;
};
// The member's type, without std::optional.
template <class F>
using value_t = typename plain<typename F::type>::type;

template <class F>
option_builder member_option(std::string key, option_kind kind, std::string help) {
  return option_builder(
      std::move(key), kind, std::move(help), [](chain_spec& spec, const option_value& v) { assign(F::get(spec), v); },
      [](const chain_spec& spec) { return value_of(F::get(spec)); });
}

// bytes_option and count_option: an integer member (not bool), or a std::optional of one.
template <auto First, auto... Rest>
option_builder integer_option(std::string key, option_kind kind, std::string help) {
  using F = field<First, Rest...>;
  static_assert(std::is_integral_v<value_t<F>> && !std::is_same_v<value_t<F>, bool>,
                "a bytes or count option is an integer member");
  return member_option<F>(std::move(key), kind, std::move(help));
}

}  // namespace detail::options

// A byte count (an unsigned integer member, or a std::optional of one: unset while empty).
template <auto First, auto... Rest>
option_builder bytes_option(std::string key, std::string help) {
  return detail::options::integer_option<First, Rest...>(std::move(key), option_kind::bytes, std::move(help));
}

// An integer that is not a size.
template <auto First, auto... Rest>
option_builder count_option(std::string key, std::string help) {
  return detail::options::integer_option<First, Rest...>(std::move(key), option_kind::count, std::move(help));
}

template <auto First, auto... Rest>
option_builder boolean_option(std::string key, std::string help) {
  using F = detail::options::field<First, Rest...>;
  static_assert(std::is_same_v<detail::options::value_t<F>, bool>, "a boolean option is a bool member");
  return detail::options::member_option<F>(std::move(key), option_kind::boolean, std::move(help));
}

template <auto First, auto... Rest>
option_builder number_option(std::string key, std::string help) {
  using F = detail::options::field<First, Rest...>;
  static_assert(std::is_floating_point_v<detail::options::value_t<F>>, "a number option is a floating-point member");
  return detail::options::member_option<F>(std::move(key), option_kind::number, std::move(help));
}

// Any string (a std::string member: unset while empty).
template <auto First, auto... Rest>
option_builder text_option(std::string key, std::string help) {
  using F = detail::options::field<First, Rest...>;
  static_assert(std::is_same_v<detail::options::value_t<F>, std::string>, "a text option is a std::string member");
  return detail::options::member_option<F>(std::move(key), option_kind::text, std::move(help));
}

// One of `names`, each the text of one value of the member (an enum): the choices, in the order
// messages list them.
template <auto First, auto... Rest>
option_builder choice_option(std::string key, std::string help,
                             std::initializer_list<std::pair<const char*, typename detail::options::field<First, Rest...>::type>> names) {
  using F = detail::options::field<First, Rest...>;
  using T = typename F::type;
  std::vector<std::pair<std::string, T>> table(names.begin(), names.end());
  option_builder b(
      std::move(key), option_kind::choice, std::move(help),
      [table](chain_spec& spec, const option_value& v) {
        for (const auto& [name, value] : table) {
          if (name == std::get<std::string>(v)) F::get(spec) = value;
        }
      },
      [table](const chain_spec& spec) -> option_value {
        for (const auto& [name, value] : table) {
          if (value == F::get(spec)) return name;
        }
        return std::monostate{};
      });
  std::vector<std::string> choices;
  for (const auto& entry : table) choices.push_back(entry.first);
  return std::move(b.choices(std::move(choices)));
}

}  // namespace gpumem
