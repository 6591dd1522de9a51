// What a path that is not a regular file is, in the words every message of gpumem uses for it
// (a plug-in library, libgpumem_torch's output files; packages/allocator-core/src/file-kind.ts says
// the same for Node.js).
#pragma once

#include <sys/stat.h>

namespace gpumem::detail {

// "a folder", "a named pipe (FIFO)", "a socket", "a character device", "a block device", or "not a
// regular file" for any other kind; nullptr for a regular file.
inline const char* non_regular_file_kind(const struct stat& st) noexcept {
  if (S_ISREG(st.st_mode)) return nullptr;
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISFIFO(st.st_mode)) return "a named pipe (FIFO)";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  return "not a regular file";
}

}  // namespace gpumem::detail
