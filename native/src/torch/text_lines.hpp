// Text read or passed on a line at a time: the configuration spec (config.cpp), warnings (warnings.cpp).
#pragma once
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpumem::torch {

// The lines of `text` split at '\n', in order, leaving out the empty ones.
inline std::vector<std::string> non_empty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

}  // namespace gpumem::torch
