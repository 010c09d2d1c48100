#include "runtime/live/bench/bench_python.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace shardgym::live {

std::string bench_source_dir() {
  if (const char* d = std::getenv("SHARDGYM_SOURCE_DIR")) return d;
#ifdef SHARDGYM_SOURCE_DIR_DEFAULT
  return SHARDGYM_SOURCE_DIR_DEFAULT;
#else
  return ".";
#endif
}

std::string run_python_json(const std::string& command, const std::string& marker) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) throw std::runtime_error("cannot start '" + command + "'");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), pipe.get())) out.append(buf, n);
  const int status = ::pclose(pipe.release());
  if (status != 0 || out.rfind(marker) == std::string::npos) {
    throw std::runtime_error("'" + command + "' failed (status " + std::to_string(status) +
                             "): " + out.substr(0, 2000));
  }
  return out;
}

std::vector<double> json_list(const std::string& out, const std::string& key, size_t from) {
  const size_t at = out.find("\"" + key + "\": [", from);
  if (at == std::string::npos) throw std::runtime_error("no '" + key + "' in: " + out);
  const size_t begin = at + key.size() + 5;
  std::vector<double> v;
  std::istringstream list(out.substr(begin, out.find(']', begin) - begin));
  std::string item;
  while (std::getline(list, item, ',')) v.push_back(std::stod(item));
  return v;
}

}  // namespace shardgym::live
