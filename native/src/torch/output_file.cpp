// output_file.hpp: the temporary file, the checks of the target, the rename.
#include "output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <random>

#include "core/file_kind.hpp"

namespace gpumem::torch {

namespace {

// What a file that is not regular is and what to give instead ("a folder; give a file name"), for
// messages; "" for a regular file.
std::string refusal_of(const struct stat& st) {
  const char* kind = detail::non_regular_file_kind(st);
  if (kind == nullptr) return "";
  return std::string(kind) + (S_ISDIR(st.st_mode) ? "; give a file name" : "; give a regular file");
}

bool is_null_device(const struct stat& st) {
  struct stat null_st {};
  return S_ISCHR(st.st_mode) && ::stat("/dev/null", &null_st) == 0 && st.st_rdev == null_st.st_rdev;
}

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// `path` from the current directory: stop() may come after the program changed directory.
std::string absolute(const std::string& path) {
  if (path.front() == '/') return path;
  char* cwd = ::getcwd(nullptr, 0);
  if (cwd == nullptr) return path;
  std::string out = std::string(cwd) + "/" + path;
  std::free(cwd);
  return out;
}

std::string name_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

output_file::~output_file() { discard(); }

bool output_file::open(const std::string& path, std::string& error) {
  discard();
  given_ = path;
  const std::string prefix = "gpumem: cannot write '" + path + "': ";
  if (path.empty()) {
    error = "gpumem: the output file name is empty";
    return false;
  }
  target_ = absolute(path);
  struct stat st {};
  bool exists = ::lstat(target_.c_str(), &st) == 0;
  if (exists && S_ISLNK(st.st_mode)) {
    char* real = ::realpath(target_.c_str(), nullptr);
    if (real == nullptr) {
      error = prefix + "is a symbolic link to a file that does not exist; give the file itself";
      return false;
    }
    target_ = real;
    std::free(real);
    exists = ::lstat(target_.c_str(), &st) == 0;
  }
  if (exists && is_null_device(st)) {
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) {
      error = prefix + std::strerror(errno);
      return false;
    }
    return true;
  }
  if (exists) {
    if (const std::string refusal = refusal_of(st); !refusal.empty()) {
      error = prefix + "is " + refusal;
      return false;
    }
  }
  // A name no other writer picks: the process id and a random number.
  std::random_device random;
  const std::string folder = folder_of(target_);
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    temporary_ = folder + "/." + name_of(target_) + "." + std::to_string(::getpid()) + "-" +
                 std::to_string(random() & 0xffffffu) + ".tmp";
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    error = prefix + "cannot create a file in " + folder + ": " + std::strerror(errno);
    temporary_.clear();
    return false;
  }
  const bool keep_owner = exists && ::geteuid() == 0;
  if (exists && (::fchmod(fd_, st.st_mode & 07777) != 0 || (keep_owner && ::fchown(fd_, st.st_uid, st.st_gid) != 0))) {
    error = prefix + "cannot give the new file the mode of the one it replaces: " + std::strerror(errno);
    discard();
    return false;
  }
  return true;
}

bool output_file::commit(std::string& error) {
  if (fd_ < 0) {
    error = "gpumem: cannot write '" + given_ + "': the file is not open";
    return false;
  }
  const std::string prefix = "gpumem: cannot write '" + given_ + "': ";
  if (temporary_.empty()) {  // the null device
    ::close(fd_);
    fd_ = -1;
    return true;
  }
  if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
    error = prefix + std::strerror(errno) + "; " + "the file was left as it was";
    fd_ = -1;
    discard();
    return false;
  }
  fd_ = -1;
  // The target may have been swapped for a device or a folder since open().
  struct stat st {};
  if (::lstat(target_.c_str(), &st) == 0) {
    if (const std::string refusal = refusal_of(st); !refusal.empty()) {
      error = prefix + "is now " + refusal;
      discard();
      return false;
    }
  }
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
    error = prefix + std::strerror(errno) + "; the file was left as it was";
    discard();
    return false;
  }
  temporary_.clear();
  const int folder = ::open(folder_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder >= 0) {
    ::fsync(folder);  // best effort: the rename is done, only its durability is at stake
    ::close(folder);
  }
  return true;
}

void output_file::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  temporary_.clear();
}

void output_file::abandon() noexcept {
  fd_ = -1;
  temporary_.clear();
}

}  // namespace gpumem::torch
