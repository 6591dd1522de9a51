// A minimal test harness, so the unit tests need nothing downloaded. TEST(name) registers a test;
// CHECK* record a failure and go on, REQUIRE* stop the current test; TEST_MAIN() runs every test
// of the file (or those whose names contain argv[1]) and exits non-zero if any failed.
#pragma once
#include <chrono>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace gpumem::test {

struct test_case {
  const char* name;
  void (*run)();
};

inline std::vector<test_case>& registry() {
  static std::vector<test_case> tests;
  return tests;
}

inline int& current_failures() {
  static int failures = 0;
  return failures;
}

struct registrar {
  registrar(const char* name, void (*run)()) { registry().push_back({name, run}); }
};

// Thrown by REQUIRE to end the current test.
struct test_aborted : std::exception {};

inline void report_failure(const char* file, int line, const std::string& message) {
  ++current_failures();
  std::fprintf(stderr, "  %s:%d: FAILED: %s\n", file, line, message.c_str());
}

template <class T>
std::string show(const T& value) {
  std::ostringstream out;
  if constexpr (std::is_pointer_v<T>) {
    out << static_cast<const void*>(value);
  } else {
    out << value;
  }
  return out.str();
}

inline int run_all(int argc, char** argv) {
  const std::string filter = argc > 1 ? argv[1] : "";
  int failed_tests = 0;
  int ran = 0;
  for (const test_case& t : registry()) {
    if (!filter.empty() && std::string(t.name).find(filter) == std::string::npos) continue;
    ++ran;
    current_failures() = 0;
    const auto start = std::chrono::steady_clock::now();
    try {
      t.run();
    } catch (const test_aborted&) {
    } catch (const std::exception& e) {
      report_failure(__FILE__, __LINE__, std::string("unexpected exception: ") + e.what());
    } catch (...) {
      report_failure(__FILE__, __LINE__, "unexpected non-standard exception");
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const bool ok = current_failures() == 0;
    if (!ok) ++failed_tests;
    std::printf("[%s] %s (%.1f ms)\n", ok ? "  OK  " : "FAILED", t.name, ms);
    std::fflush(stdout);
  }
  std::printf("%d test(s), %d failed\n", ran, failed_tests);
  return failed_tests == 0 && ran > 0 ? 0 : 1;
}

}  // namespace gpumem::test

#define TEST(name)                                                               \
  static void name();                                                            \
  static const ::gpumem::test::registrar name##_registrar_instance(#name, &name); \
  static void name()

#define TEST_MAIN() \
  int main(int argc, char** argv) { return ::gpumem::test::run_all(argc, argv); }

#define GPUMEM_TEST_FAIL(message, fatal)                                  \
  do {                                                                    \
    ::gpumem::test::report_failure(__FILE__, __LINE__, (message));        \
    if (fatal) throw ::gpumem::test::test_aborted{};                      \
  } while (0)

#define GPUMEM_TEST_BOOL(cond, fatal) \
  do {                                \
    if (!(cond)) GPUMEM_TEST_FAIL("expected " #cond, fatal); \
  } while (0)

#define GPUMEM_TEST_EQ(a, b, fatal)                                                                     \
  do {                                                                                                  \
    const auto& gpumem_lhs_ = (a);                                                                      \
    const auto& gpumem_rhs_ = (b);                                                                      \
    if (!(gpumem_lhs_ == gpumem_rhs_)) {                                                                \
      GPUMEM_TEST_FAIL(std::string("expected " #a " == " #b ", got ") + ::gpumem::test::show(gpumem_lhs_) + \
                           " vs " + ::gpumem::test::show(gpumem_rhs_),                                  \
                       fatal);                                                                          \
    }                                                                                                   \
  } while (0)

#define GPUMEM_TEST_THROWS(expr, type, fatal)                                                    \
  do {                                                                                           \
    bool gpumem_threw_ = false;                                                                  \
    try {                                                                                        \
      (void)(expr);                                                                              \
    } catch (const type&) {                                                                      \
      gpumem_threw_ = true;                                                                      \
    } catch (const std::exception& e) {                                                          \
      GPUMEM_TEST_FAIL(std::string(#expr " threw another exception: ") + e.what(), fatal);        \
      gpumem_threw_ = true;                                                                      \
    }                                                                                            \
    if (!gpumem_threw_) GPUMEM_TEST_FAIL(#expr " did not throw " #type, fatal);                 \
  } while (0)

#define CHECK(cond) GPUMEM_TEST_BOOL(cond, false)
#define REQUIRE(cond) GPUMEM_TEST_BOOL(cond, true)
#define CHECK_EQ(a, b) GPUMEM_TEST_EQ(a, b, false)
#define REQUIRE_EQ(a, b) GPUMEM_TEST_EQ(a, b, true)
#define CHECK_THROWS_AS(expr, type) GPUMEM_TEST_THROWS(expr, type, false)
#define REQUIRE_THROWS_AS(expr, type) GPUMEM_TEST_THROWS(expr, type, true)
