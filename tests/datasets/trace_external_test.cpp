// A trace reads nothing outside itself (docs/robustness.md, "Traces"): a dataset kept in
// HDF5 external storage, a virtual dataset mapped from another file, and an external link are
// refused before any read, by TraceReader and by describe_trace (`inspect`). Each case is a
// good trace whose episode_0/rewards is replaced, with the HDF5 C API, by one that takes its
// values from a file beside it holding valid rewards: a reader that followed it would accept
// the trace.
#include <filesystem>
#include <functional>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>
#include <hdf5.h>

#include "datasets/trace_reader.h"
#include "datasets/trace_summary.h"
#include "datasets/trace_writer.h"
#include "tests/datasets/trace_fixtures.h"

namespace shardgym {
namespace {

using namespace tracetest;
namespace fs = std::filesystem;

class TraceExternal : public ScratchTest {
 protected:
  void SetUp() override {
    ScratchTest::SetUp();
    trace_ = (dir_ / "trace.h5").string();
    {
      TraceWriter w(trace_, metadata());
      write_episodes(w, 0, 2, 16);
    }
    ASSERT_EQ(open_error(trace_), "");
    // The rewards episode_0 holds, as the outside source's content.
    TraceReader r(trace_);
    rewards_ = r.read_episode(0).rewards;
    ASSERT_FALSE(rewards_.empty());
  }
  // Opens the trace for writing and removes episode_0/rewards; returns the file.
  hid_t open_without_rewards() {
    hid_t f = H5Fopen(trace_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(f, 0);
    EXPECT_GE(H5Ldelete(f, "/episodes/episode_0/rewards", H5P_DEFAULT), 0);
    return f;
  }
  // Another HDF5 file with a dataset "rewards" of the same values.
  std::string source_file() {
    const std::string src = (dir_ / "source.h5").string();
    hid_t f = H5Fcreate(src.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = rewards_.size();
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(f, "rewards", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, rewards_.data());
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
    return src;
  }
  // Writes episode_0/rewards again into `f` (open_without_rewards) as a dataset whose
  // creation properties `set` fills (given them and the dataspace), then closes the file.
  void recreate_rewards(hid_t f, const std::function<herr_t(hid_t dcpl, hid_t space)>& set) {
    hsize_t n = rewards_.size();
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ASSERT_GE(set(dcpl, space), 0);
    hid_t d = H5Dcreate2(f, "/episodes/episode_0/rewards", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT,
                         dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  void expect_refused(const std::string& part) {
    const std::string what = open_error(trace_);
    ASSERT_FALSE(what.empty()) << "the trace read its data from outside itself";
    EXPECT_NE(what.find(part), std::string::npos) << what;
    EXPECT_NE(what.find(trace_), std::string::npos) << what;
    EXPECT_THROW(describe_trace(trace_), std::runtime_error);
  }
  std::string trace_;
  std::vector<double> rewards_;
};

TEST_F(TraceExternal, ExternalStorageIsRefused) {
  const std::string raw = (dir_ / "raw.bin").string();
  {
    std::ofstream out(raw, std::ios::binary);
    out.write(reinterpret_cast<const char*>(rewards_.data()), rewards_.size() * sizeof(double));
  }
  recreate_rewards(open_without_rewards(), [&](hid_t dcpl, hid_t) {
    return H5Pset_external(dcpl, raw.c_str(), 0, rewards_.size() * sizeof(double));
  });
  expect_refused("external storage");
}

TEST_F(TraceExternal, VirtualDatasetIsRefused) {
  const std::string src = source_file();
  recreate_rewards(open_without_rewards(), [&](hid_t dcpl, hid_t space) {
    return H5Pset_virtual(dcpl, space, src.c_str(), "rewards", space);
  });
  expect_refused("virtual dataset");
}

TEST_F(TraceExternal, ExternalLinkIsRefused) {
  const std::string src = source_file();
  hid_t f = open_without_rewards();
  ASSERT_GE(H5Lcreate_external(src.c_str(), "rewards", f, "/episodes/episode_0/rewards",
                               H5P_DEFAULT, H5P_DEFAULT),
            0);
  H5Fclose(f);
  expect_refused("external link");
}

// Anywhere in the file, even where the reader never looks.
TEST_F(TraceExternal, ExternalLinkAnywhereIsRefused) {
  hid_t f = H5Fopen(trace_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Lcreate_external("/etc/passwd", "x", f, "/unrelated", H5P_DEFAULT, H5P_DEFAULT), 0);
  H5Fclose(f);
  expect_refused("external link");
}

}  // namespace
}  // namespace shardgym
