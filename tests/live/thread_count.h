// The number of threads of this process, for the tests that check every rank thread is joined.
#pragma once

#include <dirent.h>

namespace shardgym::live::testing {

// Entries of /proc/self/task (one per thread); 0 where /proc is not mounted.
inline int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

}  // namespace shardgym::live::testing
