// Damaged and foreign files: every case is a std::runtime_error that names the path and says
// what is wrong; none crashes or prints HDF5's error stack.
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include <cmath>

#include <gtest/gtest.h>
#include <hdf5.h>

#include "datasets/global_heap_check.h"
#include "datasets/trace_reader.h"
#include "datasets/trace_summary.h"
#include "datasets/trace_writer.h"
#include "tests/datasets/trace_fixtures.h"

namespace shardgym {
namespace {

using namespace tracetest;
namespace fs = std::filesystem;

void expect_error(const std::string& path, const std::string& part) {
  const std::string what = open_error(path);
  ASSERT_FALSE(what.empty()) << path << " opened without error";
  std::cout << "[   INFO   ] " << what << "\n";
  EXPECT_EQ(what.rfind("trace '" + path + "': ", 0), 0u) << what;
  EXPECT_NE(what.find(part), std::string::npos) << "expected '" << part << "' in: " << what;
  // describe_trace (the CLI's `inspect`) reports the same error.
  EXPECT_THROW(describe_trace(path), std::runtime_error);
}

class TraceErrors : public ScratchTest {
 protected:
  std::string write_good() const {
    const std::string p = path("good.h5");
    TraceWriter w(p, metadata());
    write_episodes(w, 0, 3, 16);
    return p;
  }
  // A good trace copied to `p` and opened for writing (a negative id where HDF5 fails).
  hid_t open_good_copy(const std::string& p) const {
    fs::copy_file(write_good(), p, fs::copy_options::overwrite_existing);
    return H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  }
};

TEST_F(TraceErrors, TruncatedFiles) {
  const std::string good = write_good();
  const auto size = fs::file_size(good);
  ASSERT_GT(size, 4096u);
  ASSERT_TRUE(open_error(good).empty()) << open_error(good);
  struct Cut {
    uintmax_t keep;
    const char* expect;
  };
  const Cut cuts[] = {{0, "not an HDF5 file"}, {7, "not an HDF5 file"}, {100, "truncated"},
                      {size / 3, "truncated"}, {size / 2, "truncated"}, {size - 1, "truncated"}};
  for (const Cut& c : cuts) {
    SCOPED_TRACE("kept " + std::to_string(c.keep) + " of " + std::to_string(size) + " bytes");
    const std::string p = path("cut_" + std::to_string(c.keep) + ".h5");
    fs::copy_file(good, p, fs::copy_options::overwrite_existing);
    fs::resize_file(p, c.keep);
    expect_error(p, c.expect);
  }
}

TEST_F(TraceErrors, RandomBytes) {
  std::mt19937 rng(12345);
  std::string bytes(8192, '\0');
  for (char& b : bytes) b = static_cast<char>(rng() & 0xff);
  const std::string p = path("random.bin");
  std::ofstream(p, std::ios::binary).write(bytes.data(), bytes.size());
  expect_error(p, "not an HDF5 file");

  // The HDF5 signature followed by garbage: HDF5 itself must refuse it, quietly.
  const std::string sig = "\x89HDF\r\n\x1a\n";
  std::copy(sig.begin(), sig.end(), bytes.begin());
  const std::string q = path("signature_then_garbage.h5");
  std::ofstream(q, std::ios::binary).write(bytes.data(), bytes.size());
  const std::string what = open_error(q);
  EXPECT_FALSE(what.empty()) << "garbage after an HDF5 signature opened";
  EXPECT_EQ(what.rfind("trace '" + q + "': ", 0), 0u) << what;
}

TEST_F(TraceErrors, MissingFileAndDirectory) {
  expect_error(path("absent.h5"), "no such file");
  expect_error(dir_.string(), "is a directory");
}

TEST_F(TraceErrors, HdfFileThatIsNotATrace) {
  const std::string plain = path("plain.h5");
  hid_t f = H5Fcreate(plain.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Fclose(f);
  expect_error(plain, "not a shardgym trace");

  // Right attribute name, wrong value; then a schema version from the future.
  auto with_attrs = [&](const std::string& name, const char* format, int64_t version) {
    hid_t file = H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, H5T_VARIABLE);
    hid_t scalar = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(file, "format", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, str, &format);
    H5Aclose(a);
    hid_t v = H5Acreate2(file, "version", H5T_STD_I64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(v, H5T_NATIVE_INT64, &version);
    H5Aclose(v);
    H5Sclose(scalar);
    H5Tclose(str);
    H5Fclose(file);
  };
  with_attrs(path("other.h5"), "minari", 1);
  expect_error(path("other.h5"), "format = 'minari'");
  with_attrs(path("future.h5"), "shardgym-trace", 2);
  expect_error(path("future.h5"), "unsupported trace schema version 2");
}

// A scalar attribute replaced by an array (issue: values from the file reached the stack):
// refused with the attribute named, for the root's and an episode's attributes alike.
TEST_F(TraceErrors, ScalarAttributeHoldingAnArray) {
  auto replace_with_array = [&](const std::string& name, const char* group, const char* attr,
                                hid_t file_type) {
    hid_t file = open_good_copy(name);
    ASSERT_GE(file, 0);
    hid_t obj = H5Oopen(file, group, H5P_DEFAULT);
    ASSERT_GE(obj, 0);
    ASSERT_GE(H5Adelete(obj, attr), 0) << attr;
    const hsize_t n = 64;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t a = H5Acreate2(obj, attr, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<int64_t> ones(n, 1);
    if (H5Tget_class(file_type) == H5T_STRING) {
      std::vector<const char*> strs(n, "x");
      H5Awrite(a, file_type, strs.data());
    } else {
      H5Awrite(a, H5T_NATIVE_INT64, ones.data());
    }
    H5Aclose(a);
    H5Sclose(space);
    H5Oclose(obj);
    H5Fclose(file);
  };
  replace_with_array(path("version.h5"), "/", "version", H5T_STD_I64LE);
  expect_error(path("version.h5"), "attribute 'version' holds 64 values, want 1");
  hid_t str = H5Tcopy(H5T_C_S1);
  H5Tset_size(str, H5T_VARIABLE);
  replace_with_array(path("format.h5"), "/", "format", str);
  expect_error(path("format.h5"), "attribute 'format' holds 64 values, want 1");
  H5Tclose(str);
  // A damaged episode is listed as incomplete with the reason; the others stay readable.
  replace_with_array(path("seed.h5"), "/episodes/episode_0", "seed", H5T_STD_U64LE);
  TraceReader r(path("seed.h5"));
  ASSERT_EQ(r.episodes().size(), 3u);
  EXPECT_FALSE(r.episodes()[0].complete);
  EXPECT_NE(r.episodes()[0].error.find("attribute 'seed' holds 64 values, want 1"),
            std::string::npos)
      << r.episodes()[0].error;
  EXPECT_TRUE(r.episodes()[1].complete);
  EXPECT_NO_THROW(r.read_episode(r.episodes()[1].index));
}


// The bytes of `file`.
std::string file_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The trace `good` with the 8 bytes at `offset` of its first global heap collection (counted
// from "GCOL") replaced by `value`, written to `bad`.
void damage_heap(const std::string& good, size_t offset, uint64_t value, const std::string& bad) {
  std::string bytes = file_bytes(good);
  const size_t heap = bytes.find("GCOL");
  ASSERT_NE(heap, std::string::npos) << "the fixture trace has no global heap collection";
  bytes.replace(heap + offset, 8, reinterpret_cast<const char*>(&value), 8);
  std::ofstream(bad, std::ios::binary) << bytes;
}

// A damaged global heap (where HDF5 keeps every variable-length string) crashes or hangs HDF5
// 1.10 itself (issue: one flipped bit took down every reader, h5py included). The reader checks
// every collection's objects before HDF5 parses the file, and refuses it at once, by name.
// Collection header: "GCOL", version, 3 reserved, 8-byte collection size. The first object
// follows: 2-byte index, 2-byte reference count, 4 reserved, 8-byte object size.
TEST_F(TraceErrors, DamagedGlobalHeapIsRefusedBeforeHdf5ParsesIt) {
  const std::string good = write_good();
  EXPECT_EQ(check_global_heaps_of_file(good), "");
  // An object that runs past its collection: HDF5 copies out of bounds (a crash).
  damage_heap(good, 16 + 8, uint64_t(1) << 62, path("huge.h5"));
  expect_error(path("huge.h5"), "object 1 at byte");
  // A collection larger than the file.
  damage_heap(good, 8, uint64_t(1) << 40, path("collection.h5"));
  expect_error(path("collection.h5"), "declares 1099511627776 bytes");
}

// A free-space object (index 0) of size 0 made HDF5's walk of the collection loop forever:
// before the check, every reader waited for the watchdog (120 s by default). Now it is refused
// in well under a second.
TEST_F(TraceErrors, ZeroSizedFreeSpaceObjectIsRefusedWithoutWaitingForTheWatchdog) {
  const std::string good = write_good();
  std::string bytes = file_bytes(good);
  const size_t heap = bytes.find("GCOL");
  ASSERT_NE(heap, std::string::npos);
  // Make the first object the free space, of size 0.
  const uint16_t zero_index = 0;
  const uint64_t zero_size = 0;
  bytes.replace(heap + 16, 2, reinterpret_cast<const char*>(&zero_index), 2);
  bytes.replace(heap + 16 + 8, 8, reinterpret_cast<const char*>(&zero_size), 8);
  const std::string bad = path("loop.h5");
  std::ofstream(bad, std::ios::binary) << bytes;
  const auto start = std::chrono::steady_clock::now();
  expect_error(bad, "object 0 at byte");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_NE(open_error(bad).find("a free-space object is at least its 16-byte header"),
            std::string::npos);
}

// What the check cannot see is HDF5's to refuse, or the reading child's to contain: here an
// attribute's reference to an object index that the collection does not have.
TEST_F(TraceErrors, DamageTheCheckCannotSeeStaysInTheReadingProcess) {
  const std::string good = write_good();
  std::string bytes = file_bytes(good);
  const size_t heap = bytes.find("GCOL");
  ASSERT_NE(heap, std::string::npos);
  // A variable-length string in an attribute is stored as its length (4 bytes), the address
  // of its collection (8) and its object index (4). The root's 'format' attribute is the first
  // string the reader reads: point it at object 65,535 of the same collection.
  const std::string format = "shardgym-trace";
  std::string reference(12, '\0');
  const uint32_t length = static_cast<uint32_t>(format.size());
  const uint64_t address = heap;
  std::memcpy(&reference[0], &length, 4);
  std::memcpy(&reference[4], &address, 8);
  size_t at = bytes.find(reference);
  ASSERT_NE(at, std::string::npos) << "no reference to the collection with the format's length";
  const uint32_t absurd_index = 65535;
  bytes.replace(at + 12, 4, reinterpret_cast<const char*>(&absurd_index), 4);
  const std::string bad = path("index.h5");
  std::ofstream(bad, std::ios::binary) << bytes;
  EXPECT_EQ(check_global_heaps_of_file(bad), "");
  const std::string what = open_error(bad);
  std::cout << "[   INFO   ] " << what << "\n";
  EXPECT_EQ(what.rfind("trace '" + bad + "': ", 0), 0u) << what;
}

// The check on bytes: a well-formed collection passes, with 8- and 4-byte lengths; an
// occurrence of the signature that straddles two of the scan's windows is still checked.
TEST(GlobalHeapCheck, WalksCollectionsAsHdf5Does) {
  auto superblock = [](int lengths) {
    std::string sb = "\x89HDF\r\n\x1a\n";
    sb += std::string{char(0), char(0), char(0), char(0), char(0), char(8), char(lengths)};
    sb.resize(64, '\0');
    return sb;
  };
  auto put = [](std::string& s, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s += char((v >> (8 * i)) & 0xff);
  };
  // A 64-byte collection: one 5-byte object (padded to 8) and the free space after it.
  auto collection = [&](int L, uint64_t object_size, uint64_t free_size) {
    const uint64_t header = (8 + L + 7) / 8 * 8;
    std::string c = "GCOL\x01";
    c += std::string(3, '\0');
    put(c, 64, L);
    c.resize(header, '\0');
    put(c, 1, 2);
    put(c, 1, 2);
    put(c, 0, 4);
    put(c, object_size, L);
    c += std::string((object_size + 7) / 8 * 8, 'x');
    put(c, 0, 2);
    put(c, 0, 2);
    put(c, 0, 4);
    put(c, free_size, L);
    c.resize(64, '\0');
    return c;
  };
  // 64 = 16 (collection header) + 16 + 8 (the object) + 24 (free space), or with 4-byte
  // lengths 16 + 12 + 8 + 28.
  EXPECT_EQ(check_global_heaps(superblock(8) + collection(8, 5, 24)), "");
  EXPECT_EQ(check_global_heaps(superblock(4) + collection(4, 5, 28)), "");
  EXPECT_NE(check_global_heaps(superblock(8) + collection(8, 5, 0)), "");
  EXPECT_NE(check_global_heaps(superblock(8) + collection(8, 5, 32)), "");  // past the end
  EXPECT_NE(check_global_heaps(superblock(8) + collection(8, 41, 24)), "");
  // Without an HDF5 superblock there is nothing to check against.
  EXPECT_EQ(check_global_heaps(collection(8, 5, 0)), "");
  // A bad collection straddling the 1 MiB windows of the scan.
  std::string big = superblock(8);
  big.resize((1 << 20) - 2, 'z');
  big += collection(8, 5, 0);
  EXPECT_NE(check_global_heaps(big), "");
  big = superblock(8);
  big.resize((1 << 20) - 2, 'z');
  big += collection(8, 5, 24);
  EXPECT_EQ(check_global_heaps(big), "");
}

// A 20 KB file that declares a 50-million-entry strategy table (issue: grew to 6 GB before
// bad_alloc) is refused from its declared size, before anything is allocated.
TEST_F(TraceErrors, DeclaredSizesBeyondWhatTheFileCanHold) {
  const std::string p = path("table.h5");
  hid_t file = open_good_copy(p);
  ASSERT_GE(file, 0);
  ASSERT_GE(H5Ldelete(file, "strategies", H5P_DEFAULT), 0);
  const hsize_t n = 50'000'000, chunk = 1024;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, &chunk);  // chunked and never written: no storage at all
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, 128);
  hid_t d = H5Dcreate2(file, "strategies", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dclose(d);
  H5Tclose(type);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(file);
  ASSERT_LT(fs::file_size(p), 1u << 20);
  expect_error(p, "/strategies declares 50000000 elements");
}

// Traces written before metrics/repartition_peak_bytes existed read as "not measured" (NaN),
// and everything else in them as before.
TEST_F(TraceErrors, TraceWithoutTheRepartitionPeakReadsItAsNaN) {
  const std::string p = path("older.h5");
  hid_t file = open_good_copy(p);
  ASSERT_GE(file, 0);
  for (int e = 0; e < 3; ++e) {
    const std::string name =
        "episodes/episode_" + std::to_string(e) + "/metrics/repartition_peak_bytes";
    ASSERT_GE(H5Ldelete(file, name.c_str(), H5P_DEFAULT), 0) << name;
  }
  H5Fclose(file);
  TraceReader r(p);
  ASSERT_EQ(r.complete_episodes(), 3);
  const TraceEpisode ep = r.read_episode(1);
  ASSERT_EQ(ep.repartition_peak_bytes.size(), static_cast<size_t>(ep.steps()));
  for (double v : ep.repartition_peak_bytes) EXPECT_TRUE(std::isnan(v));
  const TraceEpisode fresh = TraceReader(write_good()).read_episode(1);
  EXPECT_EQ(ep.repartition_bytes, fresh.repartition_bytes);
  EXPECT_GT(fresh.repartition_peak_bytes.back(), 0);
}

// A FIFO (or any non-regular file) would block the reader forever: refused by its type.
TEST_F(TraceErrors, FifoIsRefused) {
  const std::string p = path("fifo.h5");
  fs::remove(p);
  ASSERT_EQ(mkfifo(p.c_str(), 0600), 0);
  expect_error(p, "is not a regular file");
}

// Listing episode groups is linear (issue: 4,000 groups took 10 s, 20,000 more than 300 s,
// through H5Lget_name_by_idx). 20,000 groups: the bound leaves a 10x margin on this machine.
TEST_F(TraceErrors, ManyEpisodeGroupsListFast) {
  const std::string p = path("many.h5");
  hid_t file = open_good_copy(p);
  ASSERT_GE(file, 0);
  hid_t episodes = H5Gopen2(file, "episodes", H5P_DEFAULT);
  for (int k = 100; k < 20'100; ++k) {
    const std::string name = "episode_" + std::to_string(k);
    H5Gclose(H5Gcreate2(episodes, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  }
  H5Gclose(episodes);
  H5Fclose(file);
  const auto start = std::chrono::steady_clock::now();
  TraceReader r(p);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.episodes().size(), 20'003u);
  EXPECT_EQ(r.complete_episodes(), 3);
  EXPECT_FALSE(r.episodes().back().complete);
  EXPECT_LT(s, 30.0) << "listing 20,003 episode groups took " << s << " s";
}

}  // namespace
}  // namespace shardgym
