// The trace recorder of libgpumem_torch.so (src/torch/trace_recorder.hpp) on its own: events
// through buffers much smaller than the run (so they overflow and are written many times), in both
// file formats, from one thread and from several, checked line by line; and the failures (a path
// that cannot be created, start twice, stop twice, a target that is not a regular file, a write
// that fails part way); the file replaced whole (output_file.hpp).
#include <doctest/doctest.h>

#include "trace_recorder.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>


using gpumem::torch::trace_action;
using gpumem::torch::trace_format;
using gpumem::torch::trace_options;
using gpumem::torch::trace_recorder;

namespace {

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/gpumem_trace_test_" + std::to_string(getpid()) + "_" + name;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The value of "key" in a flat JSON line: a number or a string, as text.
std::string field(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  const std::size_t i = line.find(k);
  if (i == std::string::npos) return "<missing>";
  std::size_t start = i + k.size();
  if (line[start] == '"') return line.substr(start + 1, line.find('"', start + 1) - start - 1);
  std::size_t end = line.find_first_of(",}", start);
  return line.substr(start, end - start);
}

std::uint64_t num(const std::string& line, const std::string& key) { return std::stoull(field(line, key)); }

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t end = line.find(sep, start);
    out.push_back(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The i-th event of the single-thread sequence: alloc, free, and every seventh an OOM.
struct expected_event {
  trace_action action;
  std::uint64_t ptr, bytes, stream;
  int device;
};

expected_event nth(int i) {
  const std::uint64_t ptr = 0x7f0000000000ull + static_cast<std::uint64_t>(i / 2) * 4096;
  const std::uint64_t bytes = 512 + static_cast<std::uint64_t>(i / 2) * 3;
  const std::uint64_t stream = (i / 2) % 3 == 0 ? 0 : 0x5612a8e3c9f0ull + (i / 2) % 3;
  const int device = (i / 2) % 2;
  if (i % 7 == 6) return {trace_action::oom, 0, 1ull << 40, stream, device};
  return {i % 2 == 0 ? trace_action::alloc : trace_action::free, ptr, bytes, stream, device};
}

constexpr int events_single = 203;   // buffers of 8: 25 hand-overs, several with both buffers full
constexpr std::size_t small_buffer = 8;

void record_sequence(trace_recorder& r) {
  for (int i = 0; i < events_single; ++i) {
    const expected_event e = nth(i);
    r.record(e.action, e.ptr, e.bytes, e.stream, e.device);
  }
}

const char* json_name(trace_action a) {
  return a == trace_action::alloc ? "alloc" : a == trace_action::free ? "free" : "oom";
}

const char* rmm_name(trace_action a) {
  return a == trace_action::alloc ? "allocate" : a == trace_action::free ? "free" : "allocate failure";
}

std::uint32_t my_tid() { return static_cast<std::uint32_t>(::syscall(SYS_gettid)); }

}  // namespace

TEST_CASE("format follows the extension") {
  CHECK(gpumem::torch::trace_format_for_path("a.csv") == trace_format::rmm_csv);
  CHECK(gpumem::torch::trace_format_for_path("/x/RUN.CSV") == trace_format::rmm_csv);
  CHECK(gpumem::torch::trace_format_for_path("a.jsonl") == trace_format::jsonl);
  CHECK(gpumem::torch::trace_format_for_path("trace") == trace_format::jsonl);
  CHECK(gpumem::torch::trace_format_for_path("csv") == trace_format::jsonl);
}

TEST_CASE("jsonl line by line through overflowing buffers") {
  const std::string path = temp_path("single.jsonl");
  trace_recorder r;
  trace_options o;
  o.path = path;
  o.allocator = "pool";
  o.workload_json = "{\"model\":\"t\\\"est\"}";
  o.buffer_events = small_buffer;
  std::string error;
  REQUIRE(r.start(o, error));
  CHECK(r.active());
  CHECK_EQ(r.path(), path);
  record_sequence(r);
  CHECK_EQ(r.event_count(), static_cast<std::uint64_t>(events_single));
  std::uint64_t events = 0;
  REQUIRE(r.stop(events, error));
  CHECK_EQ(events, static_cast<std::uint64_t>(events_single));
  CHECK(!r.active());
  r.record(trace_action::alloc, 1, 1, 0, 0);  // after stop: ignored

  const std::vector<std::string> lines = read_lines(path);
  REQUIRE_EQ(lines.size(), static_cast<std::size_t>(events_single + 1));
  const std::string& h = lines[0];
  CHECK_EQ(h.rfind("{\"format\":\"gpumem-trace\",\"version\":1,", 0), std::size_t{0});
  CHECK_EQ(field(h, "source"), std::string("libgpumem_torch"));
  CHECK_EQ(field(h, "allocator"), std::string("pool"));
  CHECK_EQ(field(h, "device"), std::string("cuda"));
  CHECK(h.find("\"workload\":{\"model\":\"t\\\"est\"}") != std::string::npos);
  CHECK(h.find("\"tags\":[\"other\"]") != std::string::npos);
  CHECK_EQ(num(h, "eventCount"), static_cast<std::uint64_t>(events_single));
  CHECK_EQ(h.back(), '}');
  CHECK_EQ(field(h, "createdAt").size(), std::size_t{24});  // 2026-11-23T10:23:44.927Z

  const std::string tid = std::to_string(my_tid());
  std::uint64_t last_time = 0;
  for (int i = 0; i < events_single; ++i) {
    const std::string& line = lines[static_cast<std::size_t>(i) + 1];
    const expected_event e = nth(i);
    CHECK_EQ(line.front(), '{');
    CHECK_EQ(line.back(), '}');
    CHECK_EQ(field(line, "action"), std::string(json_name(e.action)));
    CHECK_EQ(num(line, "ptr"), e.ptr);
    CHECK_EQ(num(line, "bytes"), e.bytes);
    CHECK_EQ(num(line, "stream"), e.stream);
    CHECK_EQ(num(line, "device"), static_cast<std::uint64_t>(e.device));
    CHECK_EQ(num(line, "tag"), std::uint64_t{0});
    CHECK_EQ(field(line, "thread"), tid);
    const std::uint64_t t = num(line, "timeNs");
    if (i == 0) CHECK_EQ(t, std::uint64_t{0});  // counted from the first event
    CHECK(t >= last_time);
    last_time = t;
  }
  std::remove(path.c_str());
}

TEST_CASE("rmm csv line by line through overflowing buffers") {
  const std::string path = temp_path("single.csv");
  trace_recorder r;
  trace_options o;
  o.path = path;
  o.format = trace_format::rmm_csv;
  o.buffer_events = small_buffer;
  std::string error;
  REQUIRE(r.start(o, error));
  record_sequence(r);
  std::uint64_t events = 0;
  REQUIRE(r.stop(events, error));
  CHECK_EQ(events, static_cast<std::uint64_t>(events_single));

  const std::vector<std::string> lines = read_lines(path);
  REQUIRE_EQ(lines.size(), static_cast<std::size_t>(events_single + 1));
  CHECK_EQ(lines[0], std::string("Thread,Time,Action,Pointer,Size,Stream"));
  const std::string tid = std::to_string(my_tid());
  for (int i = 0; i < events_single; ++i) {
    const std::vector<std::string> f = split(lines[static_cast<std::size_t>(i) + 1], ',');
    REQUIRE_EQ(f.size(), std::size_t{6});
    const expected_event e = nth(i);
    CHECK_EQ(f[0], tid);
    // HH:MM:SS.ffffff
    CHECK_EQ(f[1].size(), std::size_t{15});
    CHECK_EQ(f[1][2], ':');
    CHECK_EQ(f[1][5], ':');
    CHECK_EQ(f[1][8], '.');
    CHECK(std::stoi(f[1].substr(0, 2)) < 24);
    CHECK(std::stoi(f[1].substr(3, 2)) < 60);
    CHECK(std::stoi(f[1].substr(6, 2)) < 60);
    CHECK_EQ(f[2], std::string(rmm_name(e.action)));
    CHECK_EQ(f[3], hex(e.ptr));
    CHECK_EQ(f[4], std::to_string(e.bytes));
    CHECK_EQ(f[5], hex(e.stream));
  }
  std::remove(path.c_str());
}

TEST_CASE("threads interleave without losing or reordering") {
  for (trace_format format : {trace_format::jsonl, trace_format::rmm_csv}) {
    const std::string path = temp_path(format == trace_format::jsonl ? "threads.jsonl" : "threads.csv");
    trace_recorder r;
    trace_options o;
    o.path = path;
    o.format = format;
    o.buffer_events = 64;
    std::string error;
    REQUIRE(r.start(o, error));
    constexpr int threads = 4;
    constexpr int per_thread = 5000;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&r, t] {
        for (int i = 0; i < per_thread; ++i) {
          // Each thread's pointers count up, so its events' order can be checked in the file.
          const std::uint64_t ptr = (static_cast<std::uint64_t>(t + 1) << 32) + static_cast<std::uint64_t>(i);
          r.record(i % 2 == 0 ? trace_action::alloc : trace_action::free, ptr, 256, static_cast<std::uint64_t>(t), 0);
        }
      });
    }
    for (auto& th : pool) th.join();
    std::uint64_t events = 0;
    REQUIRE(r.stop(events, error));
    CHECK_EQ(events, static_cast<std::uint64_t>(threads * per_thread));
    const std::vector<std::string> lines = read_lines(path);
    REQUIRE_EQ(lines.size(), static_cast<std::size_t>(threads * per_thread + 1));
    if (format == trace_format::jsonl) CHECK_EQ(num(lines[0], "eventCount"), events);
    std::map<std::uint64_t, std::uint64_t> next;  // thread index -> next expected i
    std::map<std::string, std::uint64_t> thread_of_os_id;
    std::uint64_t last_time = 0;
    for (std::size_t n = 1; n < lines.size(); ++n) {
      std::uint64_t ptr, stream;
      std::string os_thread;
      if (format == trace_format::jsonl) {
        ptr = num(lines[n], "ptr");
        stream = num(lines[n], "stream");
        os_thread = field(lines[n], "thread");
        const std::uint64_t t = num(lines[n], "timeNs");
        CHECK(t >= last_time);
        last_time = t;
      } else {
        const std::vector<std::string> f = split(lines[n], ',');
        REQUIRE_EQ(f.size(), std::size_t{6});
        ptr = std::stoull(f[3], nullptr, 16);
        stream = std::stoull(f[5], nullptr, 16);
        os_thread = f[0];
      }
      const std::uint64_t t = (ptr >> 32) - 1;
      CHECK_EQ(stream, t);
      CHECK_EQ(ptr & 0xffffffffu, next[t]);
      next[t] = (ptr & 0xffffffffu) + 1;
      // One OS thread id per recording thread.
      auto [it, inserted] = thread_of_os_id.emplace(os_thread, t);
      if (!inserted) CHECK_EQ(it->second, t);
    }
    for (int t = 0; t < threads; ++t) CHECK_EQ(next[static_cast<std::uint64_t>(t)], static_cast<std::uint64_t>(per_thread));
    std::remove(path.c_str());
  }
}

TEST_CASE("a path that cannot be created is an error not a crash") {
  trace_recorder r;
  trace_options o;
  o.path = "/nonexistent-gpumem-dir/sub/trace.jsonl";
  std::string error;
  CHECK(!r.start(o, error));
  CHECK(error.find("/nonexistent-gpumem-dir/sub/trace.jsonl") != std::string::npos);
  CHECK(error.find("No such file or directory") != std::string::npos);
  CHECK(!r.active());
  r.record(trace_action::alloc, 1, 1, 0, 0);  // not recording: nothing happens
  std::uint64_t events = 1;
  CHECK(!r.stop(events, error));
  CHECK_EQ(events, std::uint64_t{0});
  CHECK(error.find("no trace is being recorded") != std::string::npos);
  o.path = "";
  CHECK(!r.start(o, error));
  o.path = temp_path("bad-workload.jsonl");
  o.workload_json = "[1]";
  CHECK(!r.start(o, error));
  CHECK(error.find("JSON object") != std::string::npos);
}

TEST_CASE("start twice stop twice and record again") {
  const std::string first = temp_path("first.jsonl");
  const std::string second = temp_path("second.csv");
  trace_recorder r;
  trace_options o;
  o.path = first;
  o.buffer_events = 4;
  std::string error;
  REQUIRE(r.start(o, error));
  trace_options other = o;
  other.path = second;
  CHECK(!r.start(other, error));
  CHECK(error.find("already recording") != std::string::npos);
  CHECK(error.find(first) != std::string::npos);
  r.record(trace_action::alloc, 0x1000, 10, 0, 0);
  std::uint64_t events = 0;
  REQUIRE(r.stop(events, error));
  CHECK_EQ(events, std::uint64_t{1});
  CHECK(!r.stop(events, error));
  // The recorder can be used again, in the other format.
  other.format = trace_format::rmm_csv;
  REQUIRE(r.start(other, error));
  r.record(trace_action::free, 0x1000, 10, 0, 0);
  r.record(trace_action::oom, 0, 99, 0, 0);
  REQUIRE(r.stop(events, error));
  CHECK_EQ(events, std::uint64_t{2});
  const std::vector<std::string> a = read_lines(first);
  REQUIRE_EQ(a.size(), std::size_t{2});
  CHECK_EQ(num(a[0], "eventCount"), std::uint64_t{1});
  const std::vector<std::string> b = read_lines(second);
  REQUIRE_EQ(b.size(), std::size_t{3});
  CHECK(b[1].find(",free,0x1000,10,0x0") != std::string::npos);
  CHECK(b[2].find(",allocate failure,0x0,99,0x0") != std::string::npos);
  std::remove(first.c_str());
  std::remove(second.c_str());
}

TEST_CASE("destructor completes a running trace") {
  const std::string path = temp_path("destructor.jsonl");
  {
    trace_recorder r;
    trace_options o;
    o.path = path;
    o.buffer_events = 2;
    std::string error;
    REQUIRE(r.start(o, error));
    for (int i = 0; i < 9; ++i) r.record(trace_action::alloc, 0x1000 + static_cast<std::uint64_t>(i), 1, 0, 0);
  }
  const std::vector<std::string> lines = read_lines(path);
  REQUIRE_EQ(lines.size(), std::size_t{10});
  CHECK_EQ(num(lines[0], "eventCount"), std::uint64_t{9});
  std::remove(path.c_str());
}

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// The writer's temporary files (".NAME.PID-N.tmp") left in the folder of `path`.
int leftovers(const std::string& path) {
  const std::string folder = path.substr(0, path.rfind('/'));
  const std::string prefix = "." + path.substr(path.rfind('/') + 1) + ".";
  int n = 0;
  if (DIR* d = ::opendir(folder.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
    }
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("the trace replaces a hard link with a new file and keeps the mode of the file it replaces") {
  const std::string precious = temp_path("precious");
  const std::string link = temp_path("hl.jsonl");
  write_text(precious, "precious\n");
  REQUIRE(::link(precious.c_str(), link.c_str()) == 0);
  REQUIRE(::chmod(link.c_str(), 0600) == 0);
  trace_recorder r;
  trace_options o;
  o.path = link;
  std::string error;
  REQUIRE(r.start(o, error));
  r.record(trace_action::alloc, 0x1000, 10, 0, 0);
  // Until stop(), the target is untouched.
  CHECK_EQ(read_all(link), "precious\n");
  std::uint64_t events = 0;
  REQUIRE(r.stop(events, error));
  CHECK_EQ(read_all(precious), "precious\n");
  const std::vector<std::string> lines = read_lines(link);
  REQUIRE_EQ(lines.size(), std::size_t{2});
  CHECK_EQ(num(lines[0], "eventCount"), std::uint64_t{1});
  struct stat st {};
  REQUIRE(::stat(link.c_str(), &st) == 0);
  CHECK_EQ(st.st_mode & 0777, 0600u);
  CHECK_EQ(st.st_nlink, 1u);
  CHECK_EQ(leftovers(link), 0);
  std::remove(precious.c_str());
  std::remove(link.c_str());
}

TEST_CASE("a FIFO, a folder or a device as the trace file is refused and left as it is") {
  const std::string fifo = temp_path("fifo.jsonl");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  trace_recorder r;
  trace_options o;
  o.path = fifo;
  std::string error;
  CHECK(!r.start(o, error));
  CHECK(error.find(fifo) != std::string::npos);
  CHECK(error.find("is a named pipe (FIFO)") != std::string::npos);
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  std::remove(fifo.c_str());
  o.path = "/tmp";
  CHECK(!r.start(o, error));
  CHECK(error.find("is a folder") != std::string::npos);
  o.path = "/dev/full";
  CHECK(!r.start(o, error));
  CHECK(error.find("is a character device") != std::string::npos);
  REQUIRE(::stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  // The null device takes a whole trace and stays the null device.
  o.path = "/dev/null";
  REQUIRE(r.start(o, error));
  r.record(trace_action::alloc, 0x1000, 10, 0, 0);
  std::uint64_t events = 0;
  CHECK(r.stop(events, error));
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("a write that fails part way (the file size limit, as a full disk) keeps the previous trace whole") {
  const std::string path = temp_path("limited.jsonl");
  write_text(path, "previous trace\n");
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  // SIGXFSZ ignored: the write fails with EFBIG instead of killing the process.
  auto* previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = saved;
  limited.rlim_cur = 64 * 1024;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  trace_recorder r;
  trace_options o;
  o.path = path;
  o.buffer_events = 64;
  std::string error;
  REQUIRE(r.start(o, error));
  for (int i = 0; i < 20000; ++i) r.record(trace_action::alloc, 0x1000 + static_cast<std::uint64_t>(i), 1, 0, 0);
  std::uint64_t events = 0;
  CHECK(!r.stop(events, error));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous_handler);
  CHECK(error.find(path) != std::string::npos);
  CHECK(error.find("File too large") != std::string::npos);
  CHECK(error.find("left as it was") != std::string::npos);
  CHECK_EQ(read_all(path), "previous trace\n");
  CHECK_EQ(leftovers(path), 0);
  std::remove(path.c_str());
}

TEST_CASE("a relative trace path is taken from the directory at start, whatever the directory at stop") {
  const std::string folder = temp_path("relative");
  REQUIRE(::mkdir(folder.c_str(), 0700) == 0);
  char* before = ::getcwd(nullptr, 0);
  REQUIRE(before != nullptr);
  REQUIRE(::chdir(folder.c_str()) == 0);
  trace_recorder r;
  trace_options o;
  o.path = "run.jsonl";
  std::string error;
  REQUIRE(r.start(o, error));
  r.record(trace_action::alloc, 0x1000, 10, 0, 0);
  REQUIRE(::chdir("/") == 0);
  std::uint64_t events = 0;
  CHECK(r.stop(events, error));
  REQUIRE(::chdir(before) == 0);
  std::free(before);
  const std::string path = folder + "/run.jsonl";
  CHECK_EQ(read_lines(path).size(), std::size_t{2});
  CHECK_EQ(leftovers(path), 0);
  std::remove(path.c_str());
  ::rmdir(folder.c_str());
}
