// The pool's size options over the pool_options a strategy's spec holds (a private header): 'pool'
// and 'pinned' are the same pool over another upstream, so their descriptors list the same options.
#pragma once
#include <vector>

#include "gpumem/pool_resource.hpp"
#include "gpumem/strategy_options.hpp"

namespace gpumem {

// maxReservedBytes, smallRequestLimit, smallSegmentBytes, largeSegmentRounding over the pool_options
// member `Options` (&pool_spec::options); `max_reserved_doc` says what the cap means over this
// strategy's upstream where the help does not ("" where it does).
template <auto Options>
std::vector<option_descriptor> pool_size_options(const char* max_reserved_doc) {
  return {
      bytes_option<Options, &pool_options::max_reserved_bytes>(
          "maxReservedBytes", "the most bytes the pool reserves from its upstream (unset: no cap beyond the upstream's)")
          .positive().unset_at(0).doc(max_reserved_doc)
          .env("GPUMEM_POOL_MAX_RESERVED", "pool.max_reserved").zero_means("no cap").unset_text("none"),
      bytes_option<Options, &pool_options::small_request_limit>("smallRequestLimit", "requests up to this size are small")
          .positive().js_only(),
      bytes_option<Options, &pool_options::small_segment_bytes>("smallSegmentBytes", "small requests share segments of this size")
          .positive().js_only(),
      bytes_option<Options, &pool_options::large_segment_rounding>("largeSegmentRounding", "large segments are rounded up to this")
          .positive().js_only(),
  };
}

}  // namespace gpumem
