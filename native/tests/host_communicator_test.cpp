// The shared-memory communicator (src/comm/host_communicator.hpp): ranks are fork()ed processes
// attached to one region. Collectives larger than a slot (chunked), bit-identical sums in rank
// order, in-place allGather, broadcast from any root, an abort by a rank or by the parent stopping
// the others, a timeout naming the ranks that never arrived, and argument errors that leave the
// communicator usable.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "comm/comm_errors.hpp"
#include "comm/host_communicator.hpp"

using namespace gpumem;
using namespace gpumem::comm;

namespace {

// Values of mixed magnitude, so that the order of the additions shows in the rounding.
float value(int rank, std::uint64_t i) {
  return std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank)) * (static_cast<float>(rank) * 1000.0f + 1.5f) +
         1e-3f * static_cast<float>(i);
}

std::vector<float> values(int rank, std::uint64_t count) {
  std::vector<float> v(count);
  for (std::uint64_t i = 0; i < count; ++i) v[i] = value(rank, i);
  return v;
}

bool same_bits(const float* a, const float* b, std::uint64_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// Memory the children write their results to, read by the parent after they exit.
struct shared_floats {
  float* data;
  std::size_t count;
  explicit shared_floats(std::size_t n) : count(n) {
    void* p = mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<float*>(p);
  }
  ~shared_floats() {
    if (data != nullptr) munmap(data, count * sizeof(float));
  }
};

// Unlinks the region at the end of a test.
struct region {
  std::string name;
  region(int size, std::uint64_t slot_bytes) : name(create_host_region(size, slot_bytes)) {}
  ~region() { unlink_host_region(name); }
};

// Runs body(rank) for each of `ranks` in a child process; `meanwhile` runs in the parent before it
// waits. Returns how many children failed (body returned false, threw, or the child died).
int run_ranks(const std::vector<int>& ranks, const std::function<bool(int)>& body, const std::function<void()>& meanwhile = {}) {
  std::vector<pid_t> children;
  for (int rank : ranks) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      bool ok = false;
      try {
        ok = body(rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "  rank %d threw: %s\n", rank, e.what());
      }
      if (!ok) std::fprintf(stderr, "  rank %d failed\n", rank);
      std::fflush(nullptr);
      _exit(ok ? 0 : 1);
    }
    if (pid > 0) children.push_back(pid);
  }
  if (meanwhile) meanwhile();
  int failed = static_cast<int>(ranks.size() - children.size());
  for (pid_t pid : children) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed;
}

std::vector<int> all_ranks(int size) {
  std::vector<int> r(size);
  for (int i = 0; i < size; ++i) r[i] = i;
  return r;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const comm_aborted& e) {
    return e.what();
  }
  return "(no comm_aborted)";
}

}  // namespace

TEST_CASE("all reduce sums in rank order across chunks") {
  for (int size : {2, 3}) {
    CAPTURE(size);
    const std::uint64_t count = 1000;  // 64 elements a slot: 16 chunks
    region r(size, 256);
    shared_floats results(static_cast<std::size_t>(size) * count * 2);
    REQUIRE(results.data != nullptr);
    std::vector<float> expected(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      float sum = value(0, i);
      for (int k = 1; k < size; ++k) sum += value(k, i);
      expected[i] = sum;
    }
    const int failed = run_ranks(all_ranks(size), [&](int rank) {
      host_communicator comm(r.name, size, rank, -1, 10000);
      std::vector<float> buffer = values(rank, count);
      comm.all_reduce(buffer.data(), count, nullptr);
      std::memcpy(results.data + rank * count, buffer.data(), count * sizeof(float));
      // A second round over the first's result: the barrier counters carry on.
      comm.all_reduce(buffer.data(), count, nullptr);
      std::memcpy(results.data + (size + rank) * count, buffer.data(), count * sizeof(float));
      return same_bits(results.data + rank * count, expected.data(), count);
    });
    CHECK_EQ(failed, 0);
    for (int rank = 1; rank < size; ++rank) {
      CHECK(same_bits(results.data, results.data + rank * count, count));
      CHECK(same_bits(results.data + size * count, results.data + (size + rank) * count, count));
    }
    CHECK_EQ(results.data[size * count + 7], expected[7] * static_cast<float>(size));
  }
}

TEST_CASE("all gather separate and in place") {
  const int size = 3;
  const std::uint64_t count = 300;  // 5 chunks of 64 elements
  region r(size, 256);
  const int failed = run_ranks(all_ranks(size), [&](int rank) {
    host_communicator comm(r.name, size, rank, -1, 10000);
    const std::vector<float> send = values(rank, count);
    std::vector<float> recv(size * count, -1.0f);
    comm.all_gather(send.data(), recv.data(), count, nullptr);
    std::vector<float> in_place(size * count, std::numeric_limits<float>::quiet_NaN());
    std::memcpy(in_place.data() + rank * count, send.data(), count * sizeof(float));
    comm.all_gather(in_place.data() + rank * count, in_place.data(), count, nullptr);
    bool ok = true;
    for (int k = 0; k < size; ++k) {
      const std::vector<float> want = values(k, count);
      ok = ok && same_bits(recv.data() + k * count, want.data(), count) && same_bits(in_place.data() + k * count, want.data(), count);
    }
    return ok;
  });
  CHECK_EQ(failed, 0);
}

TEST_CASE("broadcast from any root") {
  const int size = 3;
  const std::uint64_t count = 500;
  region r(size, 256);
  const int failed = run_ranks(all_ranks(size), [&](int rank) {
    host_communicator comm(r.name, size, rank, -1, 10000);
    bool ok = true;
    for (int root : {2, 0}) {
      std::vector<float> buffer = rank == root ? values(root, count) : std::vector<float>(count, -1.0f);
      comm.broadcast(buffer.data(), count, root, nullptr);
      ok = ok && same_bits(buffer.data(), values(root, count).data(), count);
    }
    return ok;
  });
  CHECK_EQ(failed, 0);
}

TEST_CASE("abort by a rank stops the others") {
  const int size = 3;
  region r(size, 4096);
  const int failed = run_ranks(all_ranks(size), [&](int rank) {
    host_communicator comm(r.name, size, rank, -1, 20000);
    if (rank == 1) {
      comm.abort("boom");
      return true;
    }
    std::vector<float> buffer(16, 1.0f);
    const std::string m = message_of([&] { comm.all_reduce(buffer.data(), 16, nullptr); });
    if (m != "aborted: rank 1 failed: boom") std::fprintf(stderr, "  rank %d: %s\n", rank, m.c_str());
    // Every later collective says the same.
    return m == "aborted: rank 1 failed: boom" && message_of([&] { comm.broadcast(buffer.data(), 16, 0, nullptr); }) == m;
  });
  CHECK_EQ(failed, 0);
}

TEST_CASE("parent abort stops ranks waiting for one that never came") {
  const int size = 3;
  region r(size, 4096);
  const int failed = run_ranks(
      {0, 1},
      [&](int rank) {
        host_communicator comm(r.name, size, rank, -1, 0);  // no timeout: only the abort ends the wait
        std::vector<float> buffer(16, 1.0f);
        const std::string m = message_of([&] { comm.all_reduce(buffer.data(), 16, nullptr); });
        if (m != "aborted: rank 2 failed: exited with code 1") std::fprintf(stderr, "  rank %d: %s\n", rank, m.c_str());
        return m == "aborted: rank 2 failed: exited with code 1";
      },
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        abort_host_region(r.name, 2, "exited with code 1");
        abort_host_region(r.name, 0, "a later abort is ignored");
      });
  CHECK_EQ(failed, 0);
}

TEST_CASE("timeout names the missing ranks and stops the group") {
  region r(3, 4096);
  host_communicator rank0(r.name, 3, 0, -1, 150);
  std::vector<float> buffer(16, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  const std::string m = message_of([&] { rank0.all_reduce(buffer.data(), 16, nullptr); });
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK_EQ(m, std::string("timed out after 150 ms in allReduce waiting for ranks 1,2"));
  CHECK(waited >= std::chrono::milliseconds(150));
  CHECK(waited < std::chrono::seconds(5));
  host_communicator rank1(r.name, 3, 1, -1, 0);
  CHECK_EQ(message_of([&] { rank1.all_gather(buffer.data(), buffer.data(), 4, nullptr); }),
           std::string("aborted: rank 0 failed: timed out after 150 ms in allReduce waiting for ranks 1,2"));
}

TEST_CASE("bad arguments throw and leave the communicator usable") {
  CHECK_THROWS_AS(create_host_region(0, 4096), invalid_argument);
  CHECK_THROWS_AS(create_host_region(max_host_ranks + 1, 4096), invalid_argument);
  CHECK_THROWS_AS(create_host_region(2, 10), invalid_argument);
  CHECK_THROWS_AS(create_host_region(2, 4098), invalid_argument);
  region r(1, 64);
  CHECK_THROWS_AS(host_communicator(r.name, 1, 1, -1, 0), invalid_argument);
  CHECK_THROWS_AS(host_communicator(r.name, 1, -1, -1, 0), invalid_argument);
  CHECK_THROWS_AS(host_communicator(r.name, 0, 0, -1, 0), invalid_argument);
  CHECK_THROWS_AS(host_communicator(r.name, 2, 0, -1, 0), invalid_argument);
  CHECK_THROWS_AS(host_communicator(r.name, 1, 0, -2, 0), invalid_argument);
  CHECK_THROWS_AS(host_communicator("/gpumem-no-such-region", 1, 0, -1, 0), invalid_argument);
  CHECK_THROWS_AS(host_communicator("no-slash", 1, 0, -1, 0), invalid_argument);
  CHECK_THROWS_AS(abort_host_region(r.name, 1, "x"), invalid_argument);
#ifndef GPUMEM_WITH_CUDA
  CHECK_THROWS_AS(host_communicator(r.name, 1, 0, 0, 0), invalid_state);
#endif

  host_communicator comm(r.name, 1, 0, -1, 1000);
  CHECK_THROWS_AS(host_communicator(r.name, 1, 0, -1, 0), invalid_state);  // rank 0 is taken
  std::vector<float> buffer = values(0, 100);  // 100 elements: 7 chunks of 16
  CHECK_THROWS_AS(comm.all_reduce(nullptr, 4, nullptr), invalid_argument);
  CHECK_THROWS_AS(comm.all_reduce(buffer.data(), 0, nullptr), invalid_argument);
  CHECK_THROWS_AS(comm.all_gather(buffer.data(), nullptr, 4, nullptr), invalid_argument);
  CHECK_THROWS_AS(comm.all_gather(buffer.data(), buffer.data(), std::numeric_limits<std::uint64_t>::max() / 2, nullptr), invalid_argument);
  CHECK_THROWS_AS(comm.broadcast(buffer.data(), 4, 1, nullptr), invalid_argument);
  CHECK_THROWS_AS(comm.broadcast(buffer.data(), 4, -1, nullptr), invalid_argument);

  // One rank: the collectives are copies.
  comm.all_reduce(buffer.data(), 100, nullptr);
  CHECK(same_bits(buffer.data(), values(0, 100).data(), 100));
  std::vector<float> recv(100, 0.0f);
  comm.all_gather(buffer.data(), recv.data(), 100, nullptr);
  CHECK(same_bits(recv.data(), buffer.data(), 100));
  comm.broadcast(buffer.data(), 100, 0, nullptr);
  CHECK(same_bits(buffer.data(), values(0, 100).data(), 100));

  comm.destroy();
  CHECK_THROWS_AS(comm.all_reduce(buffer.data(), 4, nullptr), invalid_state);
  CHECK_THROWS_AS(comm.abort("late"), invalid_state);
  comm.destroy();
  host_communicator again(r.name, 1, 0, -1, 0);  // the rank is free again
  again.all_reduce(buffer.data(), 100, nullptr);
  CHECK(unlink_host_region(r.name));
  CHECK(!unlink_host_region(r.name));
  CHECK_THROWS_AS(host_communicator(r.name, 1, 0, -1, 0), invalid_argument);
}
