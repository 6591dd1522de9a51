// Helpers shared by the host-only tests of sleep and wake by tag: an allocation made in a given tag,
// and a tag's state as a sleepable resource reports it.
#pragma once
#include <cstddef>

#include <doctest/doctest.h>

#include "gpumem/memory_resource.hpp"
#include "gpumem/sleep.hpp"

namespace gpumem::test {

// Allocates `bytes` from `r` on `stream` in `tag` (the thread's tag for the call).
inline void* allocate_in(memory_resource& r, tag_id tag, std::size_t bytes, stream_handle stream = nullptr) {
  tag_scope scope(tag);
  return r.allocate(bytes, stream);
}

// The state `s` reports for `tag`; the test fails where it reports none.
inline tag_state state_of(const sleepable& s, tag_id tag) {
  for (const tag_state& t : s.tag_states()) {
    if (t.tag == tag) return t;
  }
  FAIL("no state for tag " << tag_name(tag));
  return {};
}

}  // namespace gpumem::test
