// The chain builder (gpumem/chain_builder.hpp): the layer order for every strategy and option,
// chains built on host memory behave as their layers say, and bad specs are rejected by name
// before anything is allocated.
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/chain_builder.hpp"
#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/pool_resource.hpp"
#include "gpumem/strategy_registry.hpp"
#include "gpumem/uvm_resource.hpp"

using namespace gpumem;

namespace {

using names = std::vector<std::string>;

std::string join(const names& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : " ") + n;
  return s;
}

chain_spec host_pool() {
  chain_spec s;
  s.strategy = "pool";
  s.options<pool_spec>().upstream = placement::host;
  return s;
}

// What an unregistered strategy name is told: the registered names, in the registry's order
// (strategy_registry_test checks that order against GPUMEM_STRATEGIES).
std::string unknown_strategy_message(const std::string& name) {
  std::string list;
  for (const strategy_descriptor* d : strategies()) list += (list.empty() ? "'" : ", '") + d->name + "'";
  return "Expected one of " + list + " for strategy but received '" + name + "'";
}

// The message of the invalid_argument that building `spec` throws, or "" when none is thrown.
std::string rejection(const chain_spec& spec, std::string* argument = nullptr) {
  try {
    build_chain(spec);
  } catch (const invalid_argument& e) {
    if (argument) *argument = e.argument();
    return e.what();
  }
  return "";
}

// What chain_layers should give for `spec` by its descriptor: the leaf, then `common` (fault, limit),
// then the strategy's own layer where it has one, then `top` (track).
names planned(const chain_spec& spec, const names& common = {}, const names& top = {}) {
  const strategy_descriptor& d = strategy_of(spec);
  names layers{d.leaf_name(spec)};
  layers.insert(layers.end(), common.begin(), common.end());
  if (d.layer != strategy_layer::leaf) {
    const char* own = d.layer_name(spec);
    if (own != nullptr) layers.emplace_back(own);
  } else {
    CHECK((d.layer_name == nullptr));  // a leaf has no layer of its own
  }
  layers.insert(layers.end(), top.begin(), top.end());
  return layers;
}

}  // namespace

TEST_CASE("leaf only for each strategy") {
  // Every registered strategy that its defaults make: a leaf strategy is its leaf alone, a cache or
  // adaptor its leaf and its own layer.
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    if (d->flags.requires_options) continue;
    chain_spec s;
    s.strategy = d->name;
    const names layers = chain_layers(s);
    CHECK_EQ(join(layers), join(planned(s)));
    CHECK_EQ(layers.front(), std::string(d->leaf_name(s)));
    if (d->layer == strategy_layer::leaf) CHECK_EQ(layers.size(), std::size_t{1});
  }
  chain_spec s;
  s.strategy = "uvm";
  CHECK_EQ(join(chain_layers(s)), std::string("managed prefetch"));
  s.options<uvm_spec>().prefetch_on_allocate = false;
  CHECK_EQ(join(chain_layers(s)), std::string("managed"));
  s.strategy = "pool";
  s.clear_options();
  CHECK_EQ(join(chain_layers(s)), std::string("cuda pool"));
  CHECK_EQ(join(chain_layers(host_pool())), std::string("host pool"));
}

TEST_CASE("common layers go in one order") {
  chain_spec s = host_pool();
  s.limit_bytes = 1 << 20;
  s.fault_injection = fault_spec{3, std::nullopt};
  s.tracking_capacity = 16;
  CHECK_EQ(join(chain_layers(s)), std::string("host fault limit pool track"));
  s.strategy = "uvm";
  s.clear_options();
  CHECK_EQ(join(chain_layers(s)), std::string("managed fault limit prefetch track"));
  s.strategy = "host";
  s.fault_injection.reset();
  CHECK_EQ(join(chain_layers(s)), std::string("host limit track"));
  // The same order for every registered strategy.
  for (const strategy_descriptor* d : strategies()) {
    CAPTURE(d->name);
    if (d->flags.requires_options) continue;
    chain_spec every;
    every.strategy = d->name;
    every.limit_bytes = 1 << 20;
    every.fault_injection = fault_spec{3, std::nullopt};
    every.tracking_capacity = 16;
    CHECK_EQ(join(chain_layers(every)), join(planned(every, {"fault", "limit"}, {"track"})));
  }
}

TEST_CASE("built chain matches the plan and works") {
  chain_spec s = host_pool();
  s.limit_bytes = 8 << 20;
  s.tracking_capacity = 8;
  resource_chain chain = build_chain(s);
  REQUIRE_EQ(chain.layers.size(), std::size_t(4));
  REQUIRE(chain.tracker != nullptr);
  CHECK(&chain.top() == chain.tracker);
  CHECK(dynamic_cast<limiting_adaptor*>(chain.layers[1].get()) != nullptr);
  CHECK(chain.top().kind() == memory_kind::host);
  void* p = chain.top().allocate(1000, nullptr);
  CHECK(p != nullptr);
  // The limit sits under the pool: it caps what the pool reserves, so a request the pool cannot
  // fit under 8 MiB fails as out of memory.
  CHECK_THROWS_AS(chain.top().allocate(9 << 20, nullptr), out_of_memory);
  chain.top().deallocate(p, 1000, nullptr);
  CHECK_EQ(chain.tracker->events(false).size(), std::size_t(3));  // alloc, oom, free
}

TEST_CASE("fault layer fails the leaf under the strategy") {
  chain_spec s;
  s.fault_injection = fault_spec{std::nullopt, 0};  // every byte from the leaf fails
  resource_chain chain = build_chain(s);
  CHECK_THROWS_AS(chain.top().allocate(64, nullptr), out_of_memory);
}

TEST_CASE("bad specs are rejected by name") {
  std::string arg;
  chain_spec s;
  s.limit_bytes = 0;
  CHECK_EQ(rejection(s, &arg), std::string("Expected positive integer for limitBytes but received 0"));
  CHECK_EQ(arg, std::string("limitBytes"));
  s = chain_spec{};
  s.tracking_capacity = 0;
  CHECK_EQ(rejection(s, &arg), std::string("Expected positive integer for trackingCapacity but received 0"));
  s = chain_spec{};
  s.fault_injection = fault_spec{};
  CHECK_EQ(rejection(s, &arg), std::string("Expected failEvery and/or failAfterBytes in faultInjection but received neither"));
  s.fault_injection = fault_spec{0, std::nullopt};
  CHECK_EQ(rejection(s, &arg), std::string("Expected positive integer for faultInjection.failEvery but received 0"));
  CHECK_EQ(arg, std::string("faultInjection.failEvery"));
  s = chain_spec{};
  s.device = -1;
  CHECK_EQ(rejection(s, &arg), std::string("Expected non-negative integer for device but received -1"));
  s = host_pool();
  s.options<pool_spec>().options.small_segment_bytes = 0;
  CHECK_EQ(rejection(s, &arg), std::string("Expected positive integer for smallSegmentBytes but received 0"));
}

TEST_CASE("peer access is checked by name before anything is built") {
  std::string arg;
  chain_spec s = host_pool();
  s.peer_access = {1};
  CHECK_EQ(rejection(s, &arg),
           std::string("Expected peerAccess only for memory on a CUDA device but 'pool' over upstream 'host' holds host memory"));
  CHECK_EQ(arg, std::string("peerAccess"));
  s = chain_spec{};  // 'host'
  s.peer_access = {1};
  CHECK_EQ(rejection(s), std::string("Expected peerAccess only for memory on a CUDA device but 'host' memory is plain host memory"));
  s = chain_spec{};
  s.strategy = "expandable";
  s.options<expandable_spec>().backing = placement::host;
  s.peer_access = {1};
  CHECK_EQ(rejection(s), std::string("Expected peerAccess only for memory on a CUDA device but 'expandable' over the host twin holds host memory"));
  s = chain_spec{};
  s.strategy = "cuda";
  s.peer_access = {2, -1};
  CHECK_EQ(rejection(s), std::string("Expected non-negative integer for peerAccess[1] but received -1 of type number"));
  s.peer_access = {1, 1};
  CHECK_EQ(rejection(s), std::string("Expected distinct devices for peerAccess but cuda:1 is listed twice"));
  s.peer_access = {0};
  CHECK_EQ(rejection(s), std::string("Expected devices other than the memory's own (cuda:0) for peerAccess but received 0 at peerAccess[0]"));
  const int count = device_count();
  s.peer_access = {count + 1};  // never the memory's own device 0
  CHECK_EQ(rejection(s, &arg), "Expected CUDA device ordinals below the device count (" + std::to_string(count) +
                                   ") for peerAccess but received " + std::to_string(count + 1) + " at peerAccess[0]");
  CHECK_EQ(arg, std::string("peerAccess"));
  s = host_pool();
  s.peer_access = {};  // no peers: nothing to check
  resource_chain chain = build_chain(s);
  CHECK_EQ(chain.layers.size(), std::size_t{2});
}

TEST_CASE("strategy names round trip and unknown names are rejected") {
  for (const strategy_descriptor* d : strategies()) CHECK(&parse_strategy(d->name) == d);
  try {
    parse_strategy("managed");
    FAIL("no throw");
  } catch (const invalid_argument& e) {
    CHECK_EQ(std::string(e.what()),
             unknown_strategy_message("managed"));
  }
}

TEST_CASE("a spec names its strategy and holds that strategys options") {
  std::string arg;
  chain_spec s;
  s.strategy = "managed";  // not a registered name: rejected as parse_strategy rejects it
  CHECK_EQ(rejection(s, &arg),
           unknown_strategy_message("managed"));
  CHECK_EQ(arg, std::string("strategy"));
  CHECK_THROWS_AS(chain_layers(s), invalid_argument);
  // Unset options read as the strategy's defaults; set ones are what the descriptor reads.
  s = chain_spec{};
  s.strategy = "pool";
  CHECK(!s.has_options());
  CHECK(std::as_const(s).options<pool_spec>().upstream == placement::device);
  CHECK(!s.has_options());
  s.options<pool_spec>().upstream = placement::host;
  CHECK(s.options_type() == typeid(pool_spec));
  CHECK_EQ(join(chain_layers(s)), std::string("host pool"));
  chain_spec copy = s;  // a copy holds its own options
  copy.options<pool_spec>().upstream = placement::device;
  CHECK(s.options<pool_spec>().upstream == placement::host);
  // Another strategy's options: the typed accessor and validate() refuse them.
  CHECK_THROWS_AS(s.options<uvm_spec>(), invalid_state);
  s.strategy = "uvm";
  CHECK_EQ(rejection(s, &arg), std::string("Expected the options of strategy 'uvm' but the spec holds another strategy's"));
  CHECK_EQ(arg, std::string("options"));
  s.strategy = "host";  // a strategy without options
  CHECK_EQ(rejection(s, &arg), std::string("Expected the options of strategy 'host' but the spec holds another strategy's"));
  s.clear_options();
  CHECK_EQ(rejection(s), std::string(""));
}

#ifndef GPUMEM_WITH_CUDA
TEST_CASE("cuda strategies fail cleanly without cuda") {
  chain_spec s;
  s.strategy = "pool";  // over cuda
  s.limit_bytes = 1 << 20;
  CHECK_THROWS_AS(build_chain(s), invalid_state);
}
#endif
