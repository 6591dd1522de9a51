// libgpumem_torch's offline replay (gpumem_torch.h, gpumem_replay): a strategy chain built from a
// strategy name and its options in their text form, capped at a byte limit, running a compiled
// trace through the core's native replay loop (gpumem/replay.hpp). The chain is what the Node
// binding builds for the same spec (gpumem/chain_builder.hpp, each option through its descriptor),
// so `python -m gpumem_torch doctor` and `gpumem doctor` replay the same allocator on the same
// program. Host code: with a host twin's options (pool's upstream=host, ...) or over address-only
// memory (GPUMEM_REPLAY_ADDRESS_ONLY) nothing touches CUDA.
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "gpumem/chain_builder.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/replay.hpp"
#include "gpumem/strategy_registry.hpp"
#include "gpumem_torch.h"
#include "trace_capture.hpp"  // set_last_error

namespace {

using namespace gpumem;
using gpumem::torch::set_last_error;

// The spec of `strategy` with `count` options (JavaScript keys, text values) and a byte limit:
// each option is parsed by its descriptor, as libgpumem_torch's variables are, and set through it.
chain_spec spec_of(const char* strategy, const char* const* keys, const char* const* values, std::size_t count,
                   std::uint64_t limit_bytes, bool address_only) {
  if (strategy == nullptr) {
    throw invalid_argument(invalid_argument::kind::type, "strategy", "Expected a strategy name but received null");
  }
  const strategy_descriptor& descriptor = parse_strategy(strategy);
  chain_spec spec;
  spec.strategy = descriptor.name;
  for (std::size_t i = 0; i < count; ++i) {
    if (keys == nullptr || values == nullptr || keys[i] == nullptr || values[i] == nullptr)
      throw invalid_argument(invalid_argument::kind::type, "options",
                             "Expected an option key and value but received null");
    const std::string key = keys[i];
    const option_descriptor* option = descriptor.option(key);
    if (option == nullptr || !(option->fronts & front_js)) {
      throw invalid_argument(invalid_argument::kind::type, key,
                             "Unknown option '" + key + "' in the options of '" + descriptor.name +
                                 "'; expected one of: " + descriptor.option_keys(front_js));
    }
    option_value value;
    if (!parse_option_text(*option, values[i], value)) {
      throw invalid_argument(invalid_argument::kind::type, key,
                             "Expected " + option_text_expected(*option) + " for " + key + " but received '" +
                                 values[i] + "'");
    }
    option->apply(spec, value);
  }
  if (limit_bytes > 0) spec.limit_bytes = limit_bytes;
  spec.address_only = address_only;  // validated by the builder: only for strategies with the flag
  return spec;
}

}  // namespace

extern "C" {

GPUMEM_TORCH_API int gpumem_replay(const char* strategy, const char* const* option_keys,
                                   const char* const* option_values, size_t option_count, uint64_t limit_bytes,
                                   const uint8_t* action, const uint32_t* slot, const uint64_t* bytes,
                                   const uint64_t* stream, size_t ops, size_t slots, unsigned flags,
                                   gpumem_replay_result* out) {
  try {
    if (out == nullptr) {
      throw invalid_argument(invalid_argument::kind::type, "out", "Expected a result to fill but received null");
    }
    if (ops > 0 && (action == nullptr || slot == nullptr || bytes == nullptr || stream == nullptr))
      throw invalid_argument(invalid_argument::kind::type, "ops",
                             "Expected the four operation arrays but received null");
    if ((flags & ~unsigned{GPUMEM_REPLAY_ADDRESS_ONLY | GPUMEM_REPLAY_STOP_AT_FIRST_OOM}) != 0)
      throw invalid_argument(invalid_argument::kind::range, "flags",
                             "Expected GPUMEM_REPLAY_ADDRESS_ONLY and GPUMEM_REPLAY_STOP_AT_FIRST_OOM only for flags but "
                             "received " + std::to_string(flags));
    const chain_spec spec = spec_of(strategy, option_keys, option_values, option_count, limit_bytes,
                                    (flags & GPUMEM_REPLAY_ADDRESS_ONLY) != 0);
    std::vector<bench::replay_op> program(ops);
    for (std::size_t i = 0; i < ops; ++i) {
      if (action[i] > 1)
        throw invalid_argument(invalid_argument::kind::range, "action",
                               "Expected 0 (allocate) or 1 (free) for action[" + std::to_string(i) + "] but received " +
                                   std::to_string(action[i]));
      program[i] = {static_cast<bench::replay_action>(action[i]), slot[i], bytes[i],
                    reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(stream[i]))};
    }
    bench::validate_replay(program, slots);  // before any memory is taken
    resource_chain chain = build_chain(spec);
    bench::replay_options options;
    options.stop_at_first_oom = (flags & GPUMEM_REPLAY_STOP_AT_FIRST_OOM) != 0;
    const bench::replay_result result = bench::replay(chain.top(), program, slots, options);
    const bench::replay_pass& pass = result.passes.front();
    *out = gpumem_replay_result{};
    out->ooms = pass.ooms;
    out->allocs = pass.allocs;
    out->frees = pass.frees;
    out->skipped_frees = pass.skipped_frees;
    out->peak_allocated_bytes = pass.end.peak_allocated_bytes;
    out->peak_reserved_bytes = pass.end.peak_reserved_bytes;
    out->end_reserved_bytes = pass.end.reserved_bytes;
    set_last_error("");
    return GPUMEM_TORCH_OK;
  } catch (const invalid_argument& e) {
    set_last_error(std::string("gpumem: gpumem_replay: ") + e.what());
    return GPUMEM_TORCH_ERR_ARGUMENT;
  } catch (const std::exception& e) {
    set_last_error(std::string("gpumem: gpumem_replay: ") + e.what());
    return GPUMEM_TORCH_ERR_STATE;
  } catch (...) {
    set_last_error("gpumem: gpumem_replay failed (unknown error)");
    return GPUMEM_TORCH_ERR_STATE;
  }
}

}  // extern "C"
