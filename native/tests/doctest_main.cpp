// The one main() of the C++ unit tests: doctest's, compiled once and linked into every test
// executable (see CMakeLists.txt). Each executable runs the test cases of its own file; doctest's
// options select among them (e.g. `pool_basic_test -tc="*segment*"`, `--list-test-cases`).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
