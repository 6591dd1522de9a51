// An output file written whole or not at all, as gpumem's other writers do it (the TypeScript
// OutputFile in packages/allocator-core, gpumem_torch/_output.py): bytes go to a new temporary
// file in the target's folder (O_EXCL, so never an existing file or a planted link), which
// commit() syncs and renames over the target. So a failed write leaves the previous file or none,
// a hard link's other names keep their bytes (the target gets a new inode), and a replaced file
// keeps its permission bits (and, for root, its owner). Only regular files are replaced: a
// device, FIFO, socket or folder is refused and never written through; the null device takes
// the bytes directly. A symbolic link is followed to the file it names, which is replaced.
// Every message names the file as given.
#pragma once
#include <string>

namespace gpumem::torch {

class output_file {
 public:
  output_file() = default;
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file();  // discards what was not committed

  // Checks `path` and creates the temporary file. Returns false with a message naming `path`.
  bool open(const std::string& path, std::string& error);
  // The descriptor to write to (the temporary file, or the null device); -1 when not open.
  int fd() const noexcept { return fd_; }
  // Syncs the temporary file and renames it over the target. Returns false with a message naming
  // the file (the temporary file is removed, the target untouched).
  bool commit(std::string& error);
  // Removes the temporary file; the target stays as it was. Safe to call when not open.
  void discard() noexcept;
  // In a child made by fork(): forgets the file without closing or removing it (the parent's).
  void abandon() noexcept;

 private:
  std::string given_;      // the path as given, for messages
  std::string target_;     // where commit() renames to (a symbolic link's final file)
  std::string temporary_;  // empty for the null device
  int fd_ = -1;
};

}  // namespace gpumem::torch
