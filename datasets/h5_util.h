// Private to shardgym::datasets: the only header that includes <hdf5.h>. Public headers of
// this folder never include it, so HDF5 stays a PRIVATE dependency.
//
// What it gives the trace writer and reader:
//   H5Id               RAII owner of an hid_t (closes by object type)
//   silence_hdf5()     turns off HDF5's automatic error-stack printing on this thread
//   H5Error::check     converts a failed call into std::runtime_error naming the file, the
//                      operation and HDF5's innermost reason (never a printed stack, never a crash)
//   Column             an extendable, chunked, compressed (N) or (N, W) dataset appended by rows
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <hdf5.h>

namespace shardgym::h5 {

class H5Id {
 public:
  H5Id() = default;
  explicit H5Id(hid_t id) : id_(id) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  H5Id(H5Id&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  H5Id& operator=(H5Id&& o) noexcept;
  ~H5Id() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();      // closes (errors on close are ignored: nothing sensible to do in a destructor)
  hid_t release() {  // gives up ownership without closing
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

void silence_hdf5();

// Error context: every failure message starts with "trace '<path>': ".
class H5Error {
 public:
  explicit H5Error(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  // The HDF5 error stack of this thread as "outer reason (inner reason)"; clears it.
  static std::string stack_text();
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void fail_hdf5(const std::string& what) const;  // appends stack_text()
  hid_t check_id(hid_t id, const std::string& what) const {
    if (id < 0) fail_hdf5(what);
    return id;
  }
  void check(herr_t status, const std::string& what) const {
    if (status < 0) fail_hdf5(what);
  }

 private:
  std::string path_;
};

// Attributes. Strings are variable-length UTF-8 (h5py reads them as `str`).
void write_attr_string(const H5Error& err, hid_t obj, const std::string& name,
                       const std::string& value);
void write_attr_int64(const H5Error& err, hid_t obj, const std::string& name, int64_t value);
void write_attr_double(const H5Error& err, hid_t obj, const std::string& name, double value);
void write_attr_uint64(const H5Error& err, hid_t obj, const std::string& name, uint64_t value);
void write_attr_doubles(const H5Error& err, hid_t obj, const std::string& name,
                        const std::vector<double>& values);  // 1-D (size ≥ 0)
// Rewrites an existing integer attribute in place (same size: the object header keeps its
// layout, which matters for the completeness flag).
void overwrite_attr_int64(const H5Error& err, hid_t obj, const std::string& name, int64_t value);

bool has_attr(hid_t obj, const std::string& name);
std::string read_attr_string(const H5Error& err, hid_t obj, const std::string& name);
int64_t read_attr_int64(const H5Error& err, hid_t obj, const std::string& name);
uint64_t read_attr_uint64(const H5Error& err, hid_t obj, const std::string& name);
double read_attr_double(const H5Error& err, hid_t obj, const std::string& name);
// At most kMaxAttrValues: these arrays hold one value per block or per rank (a config allows
// 65,536 layers; an attribute lives in an object header, which HDF5 keeps under 64 KiB unless
// it spills into dense storage).
constexpr hssize_t kMaxAttrValues = 1 << 20;
std::vector<double> read_attr_doubles(const H5Error& err, hid_t obj, const std::string& name);

// A trace reads nothing outside itself (docs/robustness.md, "Traces"). Every link of the
// file must be a hard link: an external link (or a soft or user-defined one) is refused before
// anything follows it. One pass of H5Lvisit, links only (no object is opened).
void require_only_hard_links(const H5Error& err, hid_t file);
// H5Dopen2 of `name`, refusing a dataset whose raw data is not in the file (external storage:
// H5Pget_external_count > 0; a virtual dataset: layout H5D_VIRTUAL) before any of it is read.
H5Id open_dataset(const H5Error& err, hid_t loc, const std::string& name);

// Shape of a dataset (rank 1 or 2); `where` names it in errors.
std::vector<hsize_t> dataset_shape(const H5Error& err, hid_t dset, const std::string& where);
// Reads a whole dataset converted to `mem_type` (H5T_NATIVE_*); checks the element count.
void read_all(const H5Error& err, hid_t loc, const std::string& name, hid_t mem_type, void* out,
              size_t expected_elements);

// Names of the links in a group, in name order.
std::vector<std::string> link_names(const H5Error& err, hid_t group, const std::string& where);

bool deflate_available();

// Fixed-length string type used by the /strategies table (null-padded ASCII).
constexpr size_t kStrategyStringBytes = 128;
H5Id strategy_string_type(const H5Error& err);

// An appendable dataset of shape (rows, width), or (rows) when width == 0. Chunks hold about
// 64 KiB, and no more rows than `expected_rows` (0 = unknown), since a chunk is stored whole.
class Column {
 public:
  Column() = default;
  Column(const H5Error& err, hid_t loc, const std::string& name, hid_t mem_type, hid_t file_type,
         int width, int deflate_level, hsize_t expected_rows = 0);
  void append(const H5Error& err, const void* row);  // one row: max(width, 1) elements
  hsize_t rows() const { return rows_; }
  int width() const { return width_; }
  hid_t id() const { return dset_.get(); }
  const std::string& name() const { return name_; }

 private:
  H5Id dset_, file_space_, mem_space_;
  hid_t mem_type_ = H5I_INVALID_HID;  // a predefined native type (not owned)
  std::string name_;
  int width_ = 0;
  hsize_t rows_ = 0;
};

}  // namespace shardgym::h5
