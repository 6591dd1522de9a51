#include "gpumem/prefetch_adaptor.hpp"

namespace gpumem {

void* prefetch_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  void* ptr = upstream().allocate(bytes, stream);
  try {
    upstream().prefetch(ptr, bytes, placement::device, stream);
  } catch (...) {
    upstream().deallocate(ptr, bytes, stream);
    throw;
  }
  return ptr;
}

}  // namespace gpumem
