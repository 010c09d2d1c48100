// A whole trace file from arbitrary bytes, read the way `shardgym inspect` and replay read
// one: TraceReader (the HDF5 parse in a forked child, datasets/isolated_read.h), then every
// complete episode, then each episode's plans against the strategies table. Expected errors
// are std::runtime_error; a crash, a hang or a sanitizer report of *this* process is a
// finding. (A crash inside HDF5 happens in the child and comes back as an error: that is the
// protection under test. The child's own coverage is not seen by libFuzzer, so the byte-level
// mutations below are guided by the parent's code only; trace_wire_fuzz covers the decoder.)
//
// Speed (docs/fuzzing.md has the measurements): HDF5 1.10 is not instrumented, and its
// global-heap bug makes ASan's memcpy interceptor report in the reading child for many inputs.
// Symbolizing that report (llvm-symbolizer loading the debug info afresh in every child) cost
// about half a second per such input, so this harness turns symbolization off
// (__asan_default_options; fuzz.sh replays a finding with symbolize=1 for a readable stack),
// and in each reading child (pthread_atfork, never in the library) it sends sanitizer reports
// to a file and replaces libFuzzer's death callback, so the child writes no crash-* file of
// its own. After each input the harness reads those reports: one whose first frame outside
// this executable is not in HDF5 is a bug in our code running in the child, and a finding
// (abort). The others are contained failures of HDF5, counted by kind and printed at exit
// with the reader's other contained failures (signals, timeouts, memory).
#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sanitizer/common_interface_defs.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "datasets/trace_reader.h"
#include "fuzz/fuzz_check.h"

using namespace shardgym;

// quarantine_size_mb=16 (ASan's default is 256): every input forks a reading child, and fork
// copies the page tables of everything the parent maps; with the default quarantine the
// parent grew to 342 MB and fork was 83 % of the CPU time. With 16 MB: 66 MB, and 384 inputs a
// second instead of 217 (45 s runs, -seed=1, idle machine; docs/fuzzing.md). Freed memory
// stays poisoned for the last 16 MB of frees, many inputs' worth at 32 KB per input.
extern "C" const char* __asan_default_options() { return "symbolize=0:quarantine_size_mb=16"; }

namespace {

std::string scratch_dir() {
  const char* dir = std::getenv("TMPDIR");
  if (dir && *dir) return dir;
  return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

const std::string& scratch_path() {
  static const std::string p =
      scratch_dir() + "/shardgym_trace_fuzz_" + std::to_string(::getpid()) + ".h5";
  return p;
}

const std::string& reports_dir() {
  static const std::string d =
      scratch_dir() + "/shardgym_trace_fuzz_" + std::to_string(::getpid()) + ".reports";
  return d;
}

// Set in the parent before any fork; the child handler only reads it.
char g_report_prefix[4096];

void in_reading_child() {
  __sanitizer_set_report_path(g_report_prefix);
  __sanitizer_set_death_callback(nullptr);
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// What a contained failure of the reading child was, for the counts at exit.
struct Tally {
  uint64_t inputs = 0, ok = 0, parse_errors = 0;
  std::map<std::string, uint64_t> contained;  // class -> inputs
  std::map<std::string, double> seconds;      // class ("ok", "parse error", ...) -> wall
} g_tally;

void print_tally() {
  std::fprintf(stderr,
               "trace_file_fuzz: %llu inputs: %llu read, %llu refused by the reader's checks; "
               "contained failures of the reading child (HDF5), per input:\n",
               static_cast<unsigned long long>(g_tally.inputs),
               static_cast<unsigned long long>(g_tally.ok),
               static_cast<unsigned long long>(g_tally.parse_errors));
  for (const auto& [what, n] : g_tally.contained) {
    std::fprintf(stderr, "  %8llu  %s\n", static_cast<unsigned long long>(n), what.c_str());
  }
  std::fprintf(stderr, "trace_file_fuzz: wall seconds by outcome:");
  for (const auto& [what, s] : g_tally.seconds) std::fprintf(stderr, " [%s %.1f]", what.c_str(), s);
  std::fprintf(stderr, "\n");
  std::remove(scratch_path().c_str());
  rmdir(reports_dir().c_str());
}

// "memcpy-param-overlap in libhdf5_serial.so.103" from a report; aborts (a finding) when the
// report is not HDF5's.
std::string classify_report(const std::string& text) {
  static const std::string exe = self_exe();
  std::string kind = "unknown report";
  std::vector<std::string> modules;  // of the stack's frames, top first
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find("ERROR: AddressSanitizer: ");
    if (at != std::string::npos && kind == "unknown report") {
      kind = line.substr(at + 25);
      kind = kind.substr(0, kind.find_first_of(": "));
    } else if (line.find("runtime error:") != std::string::npos && kind == "unknown report") {
      kind = "UBSan runtime error";
    }
    const size_t hash = line.find_first_not_of(' ');
    if (hash == std::string::npos || line.compare(hash, 1, "#") != 0) continue;
    // "    #1 0x7eff...  (/lib/x86_64-linux-gnu/libhdf5_serial.so.103+0x167b8d) (BuildId: ...)"
    const size_t open = line.find('(');
    const size_t plus = open == std::string::npos ? open : line.find('+', open);
    if (plus != std::string::npos) modules.push_back(line.substr(open + 1, plus - open - 1));
  }
  // No frame at all: the child was stopped (by the watchdog) while writing its report; the
  // caller reads the input again with more time to see whose report it is.
  if (modules.empty()) return "";
  auto first_outside = [&](size_t from) -> std::string {
    for (size_t i = from; i < modules.size(); ++i)
      if (modules[i] != exe) return modules[i].substr(modules[i].rfind('/') + 1);
    return "";
  };
  std::string module;
  if (kind == "unknown report") {
    // A bare stack without a sanitizer's header is libFuzzer's malloc limit (-rss_limit_mb,
    // inherited by the child) refusing one allocation: its own frames and ASan's allocator
    // sit on top, all in this executable, so whose allocation it was shows at the first frame
    // outside it (HDF5 sizing a chunk buffer from what the file declares; our own code's would
    // show libc's, at main). Outside the fuzzer the child's address-space limit turns such a
    // request into an error.
    kind = "malloc above the fuzzer's limit";
    module = first_outside(0);
  } else {
    // A sanitizer's report: frame #0 is its interceptor (in this executable); the caller is
    // ours when frame #1 is in this executable too.
    module = modules.size() >= 2 && modules[0] == exe && modules[1] == exe ? "this executable"
                                                                           : first_outside(0);
  }
  if (module.find("hdf5") == std::string::npos) {
    std::fprintf(stderr, "a sanitizer report in the reading child outside HDF5:\n%s\n",
                 text.c_str());
    FUZZ_CHECK(false, "reading child reported in " + (module.empty() ? "?" : module));
  }
  return "sanitizer report: " + kind + " in " + module;
}

// Reads (and removes) the reports the children of this input left; returns how many, and
// sets `cut_short` if one of them had no stack.
int collect_reports(bool* cut_short) {
  DIR* d = opendir(reports_dir().c_str());
  if (!d) return 0;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string path = reports_dir() + "/" + e->d_name;
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    const std::string c = classify_report(s.str());
    if (c.empty()) {
      *cut_short = true;
    } else {
      ++g_tally.contained[c];
    }
    std::remove(path.c_str());
    ++n;
  }
  closedir(d);
  return n;
}

// The reader's error for a contained child failure (datasets/isolated_read.cpp), by class.
std::string contained_class(const std::string& what) {
  if (what.find("the HDF5 library crashed reading it (signal") != std::string::npos) {
    const size_t at = what.find("(signal ");
    return "killed by " + what.substr(at + 1, what.find(')', at) - at - 1);
  }
  if (what.find("its process exited with status") != std::string::npos) return "exited non-zero";
  if (what.find("did not finish within") != std::string::npos) return "timeout (watchdog)";
  if (what.find("MiB allowed") != std::string::npos) return "out of memory";
  if (what.find("ended without a reply") != std::string::npos) return "no reply";
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A damaged file that makes HDF5 loop is stopped by the reader's own watchdog, well before
  // libFuzzer's -timeout. Inputs are at most a few tens of KB (the seed's size), read in
  // 5-60 ms even on the loaded 2-core machine, so 0.25 s is ample; at the former 2 s the 4 %
  // of inputs that make HDF5 loop took 60 % of the time (docs/fuzzing.md). A read stopped
  // early is an error like any other: what the harness checks does not change.
  if (!std::getenv("SHARDGYM_TRACE_READ_TIMEOUT_S")) {
    setenv("SHARDGYM_TRACE_READ_TIMEOUT_S", "0.25", 1);
  }
  mkdir(reports_dir().c_str(), 0700);
  std::snprintf(g_report_prefix, sizeof g_report_prefix, "%s/report", reports_dir().c_str());
  pthread_atfork(nullptr, nullptr, in_reading_child);
  std::atexit(print_tally);
  return 0;
}

// Reads the trace at `path` as `shardgym inspect` would; returns the outcome's class.
std::string read_trace(const std::string& path);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& path = scratch_path();
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  std::string outcome = read_trace(path);
  bool cut_short = false;
  int reports = collect_reports(&cut_short);
  if (cut_short) {
    // A report the watchdog cut short (an HDF5 memcpy of 2^48 bytes took ASan longer than
    // 0.25 s to describe): read the input again with time enough to see its stack.
    const std::string quick = std::getenv("SHARDGYM_TRACE_READ_TIMEOUT_S");
    setenv("SHARDGYM_TRACE_READ_TIMEOUT_S", "10", 1);
    outcome = read_trace(path);
    setenv("SHARDGYM_TRACE_READ_TIMEOUT_S", quick.c_str(), 1);
    cut_short = false;
    reports = collect_reports(&cut_short);
    FUZZ_CHECK(!cut_short, "a report of the reading child without a stack, even with 10 s");
    ++g_tally.contained["(of which read again: report cut short by the watchdog)"];
  }
  if (!outcome.empty() && outcome != "read" && outcome != "refused" &&
      outcome != "exited non-zero") {
    ++g_tally.contained[outcome];
  }
  if (reports == 0 && outcome == "exited non-zero") {
    ++g_tally.contained["exited non-zero without a sanitizer report"];
  }
  ++g_tally.inputs;
  g_tally.ok += outcome == "read";
  g_tally.parse_errors += outcome == "refused";
  g_tally.seconds[outcome] +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 0;
}

std::string read_trace(const std::string& path) {
  std::string outcome = "read";
  try {
    TraceReader reader(path);
    for (const TraceEpisodeInfo& info : reader.episodes()) {
      if (!info.complete) continue;
      const TraceEpisode ep = reader.read_episode(info.index);
      FUZZ_CHECK(ep.steps() == info.steps, info.name);
      for (int t = 0; t < ep.steps(); ++t) {
        try {
          ep.plan(t, reader.strategies());
        } catch (const std::runtime_error&) {
        } catch (const std::invalid_argument&) {  // a table entry that is not a strategy
        }
      }
    }
  } catch (const std::runtime_error& e) {
    const std::string c = contained_class(e.what());
    outcome = c.empty() ? "refused" : c;
  }
  return outcome;
}
