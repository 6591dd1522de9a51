// The exports' one guard at the C boundary: an exception never leaves libgpumem_torch; it becomes
// the status (or the null/zero result) the export documents, with gpumem_last_error saying what failed.
#pragma once
#include <exception>
#include <string>

#include "trace_capture.hpp"  // set_last_error

namespace gpumem::torch {

// Runs body and returns what it returns; an exception sets the message "gpumem: <what> failed: <its
// message>" ("gpumem: <what> failed" for one that is not a std::exception) and returns
// failed(the exception).
template <class Failed, class Body>
auto guard_export_as(const char* what, Failed failed, Body&& body) noexcept -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    set_last_error(std::string("gpumem: ") + what + " failed: " + e.what());
    return failed(std::current_exception());
  } catch (...) {
    set_last_error(std::string("gpumem: ") + what + " failed");
    return failed(std::current_exception());
  }
}

// guard_export_as with one result for every exception.
template <class Result, class Body>
auto guard_export(const char* what, Result on_error, Body&& body) noexcept -> decltype(body()) {
  return guard_export_as(what, [on_error](const std::exception_ptr&) { return on_error; }, body);
}

}  // namespace gpumem::torch
