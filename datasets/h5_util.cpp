#include "datasets/h5_util.h"

#include <algorithm>
#include <stdexcept>

namespace shardgym::h5 {

H5Id& H5Id::operator=(H5Id&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void H5Id::reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      H5Idec_ref(id_);
      break;
  }
  id_ = H5I_INVALID_HID;
}

void silence_hdf5() {
  // The automatic printer belongs to the error stack, which is per thread in a thread-safe
  // build; setting it is cheap, so every entry point calls this.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

namespace {

herr_t collect_error(unsigned n, const H5E_error2_t* e, void* data) {
  auto* out = static_cast<std::vector<std::string>*>(data);
  if (e->desc && *e->desc) out->emplace_back(e->desc);
  return 0;
}

}  // namespace

std::string H5Error::stack_text() {
  std::vector<std::string> descs;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &descs);
  H5Eclear2(H5E_DEFAULT);
  if (descs.empty()) return "unknown HDF5 error";
  // Downward: the API-level reason first, the root cause last.
  if (descs.size() == 1 || descs.front() == descs.back()) return descs.front();
  return descs.front() + " (" + descs.back() + ")";
}

void H5Error::fail(const std::string& what) const {
  throw std::runtime_error("trace '" + path_ + "': " + what);
}

void H5Error::fail_hdf5(const std::string& what) const { fail(what + ": " + stack_text()); }

namespace {

H5Id scalar_space(const H5Error& err) {
  return H5Id(err.check_id(H5Screate(H5S_SCALAR), "create scalar dataspace"));
}

H5Id vlen_string_type(const H5Error& err) {
  H5Id t(err.check_id(H5Tcopy(H5T_C_S1), "copy string type"));
  err.check(H5Tset_size(t.get(), H5T_VARIABLE), "set string size");
  err.check(H5Tset_cset(t.get(), H5T_CSET_UTF8), "set string charset");
  return t;
}

H5Id open_attr(const H5Error& err, hid_t obj, const std::string& name) {
  if (!has_attr(obj, name)) err.fail("missing attribute '" + name + "'");
  return H5Id(
      err.check_id(H5Aopen(obj, name.c_str(), H5P_DEFAULT), "open attribute '" + name + "'"));
}

template <typename T>
void write_scalar_attr(const H5Error& err, hid_t obj, const std::string& name, hid_t file_type,
                       hid_t mem_type, T value) {
  H5Id space = scalar_space(err);
  H5Id attr(
      err.check_id(H5Acreate2(obj, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   "create attribute '" + name + "'"));
  err.check(H5Awrite(attr.get(), mem_type, &value), "write attribute");
}

}  // namespace

void write_attr_string(const H5Error& err, hid_t obj, const std::string& name,
                       const std::string& value) {
  H5Id type = vlen_string_type(err);
  H5Id space = scalar_space(err);
  if (has_attr(obj, name)) err.check(H5Adelete(obj, name.c_str()), "delete attribute");
  H5Id attr(
      err.check_id(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   "create attribute '" + name + "'"));
  const char* data = value.c_str();
  err.check(H5Awrite(attr.get(), type.get(), &data), "write attribute");
}

void write_attr_int64(const H5Error& err, hid_t obj, const std::string& name, int64_t value) {
  write_scalar_attr(err, obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, value);
}

void write_attr_double(const H5Error& err, hid_t obj, const std::string& name, double value) {
  write_scalar_attr(err, obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, value);
}

void write_attr_uint64(const H5Error& err, hid_t obj, const std::string& name, uint64_t value) {
  write_scalar_attr(err, obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, value);
}

void write_attr_doubles(const H5Error& err, hid_t obj, const std::string& name,
                        const std::vector<double>& values) {
  hsize_t n = values.size();
  H5Id space(err.check_id(H5Screate_simple(1, &n, nullptr), "create dataspace"));
  H5Id attr(err.check_id(
      H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      "create attribute '" + name + "'"));
  if (n > 0) err.check(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, values.data()), "write attribute");
}

void overwrite_attr_int64(const H5Error& err, hid_t obj, const std::string& name, int64_t value) {
  H5Id attr = open_attr(err, obj, name);
  err.check(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), "rewrite attribute '" + name + "'");
}

bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

namespace {

// A scalar attribute must hold exactly one value: H5Aread writes every element it holds, and
// the readers below give it room for one (a file is untrusted input).
void require_one_value(const H5Error& err, hid_t attr, const std::string& name) {
  H5Id space(err.check_id(H5Aget_space(attr), "attribute dataspace"));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n != 1)
    err.fail("attribute '" + name + "' holds " + std::to_string(static_cast<long long>(n)) +
             " values, want 1");
}

}  // namespace

std::string read_attr_string(const H5Error& err, hid_t obj, const std::string& name) {
  H5Id attr = open_attr(err, obj, name);
  require_one_value(err, attr.get(), name);
  H5Id type(err.check_id(H5Aget_type(attr.get()), "attribute type"));
  if (H5Tget_class(type.get()) != H5T_STRING) err.fail("attribute '" + name + "' is not a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    // Same character set as the file's: HDF5 has no conversion between ASCII and UTF-8.
    H5Id mem = vlen_string_type(err);
    err.check(H5Tset_cset(mem.get(), H5Tget_cset(type.get())), "set string charset");
    char* data = nullptr;
    err.check(H5Aread(attr.get(), mem.get(), &data), "read attribute '" + name + "'");
    std::string out = data ? data : "";
    H5free_memory(data);
    return out;
  }
  size_t size = H5Tget_size(type.get());
  std::string buf(size, '\0');
  err.check(H5Aread(attr.get(), type.get(), buf.data()), "read attribute '" + name + "'");
  buf.resize(std::find(buf.begin(), buf.end(), '\0') - buf.begin());
  return buf;
}

int64_t read_attr_int64(const H5Error& err, hid_t obj, const std::string& name) {
  H5Id attr = open_attr(err, obj, name);
  require_one_value(err, attr.get(), name);
  int64_t v = 0;
  err.check(H5Aread(attr.get(), H5T_NATIVE_INT64, &v), "read attribute '" + name + "'");
  return v;
}

uint64_t read_attr_uint64(const H5Error& err, hid_t obj, const std::string& name) {
  H5Id attr = open_attr(err, obj, name);
  require_one_value(err, attr.get(), name);
  uint64_t v = 0;
  err.check(H5Aread(attr.get(), H5T_NATIVE_UINT64, &v), "read attribute '" + name + "'");
  return v;
}

double read_attr_double(const H5Error& err, hid_t obj, const std::string& name) {
  H5Id attr = open_attr(err, obj, name);
  require_one_value(err, attr.get(), name);
  double v = 0;
  err.check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v), "read attribute '" + name + "'");
  return v;
}

std::vector<double> read_attr_doubles(const H5Error& err, hid_t obj, const std::string& name) {
  H5Id attr = open_attr(err, obj, name);
  H5Id space(err.check_id(H5Aget_space(attr.get()), "attribute dataspace"));
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) err.fail_hdf5("size of attribute '" + name + "'");
  if (n > kMaxAttrValues) {
    err.fail("attribute '" + name + "' declares " + std::to_string(n) + " values, more than " +
             std::to_string(kMaxAttrValues) + " (it holds one per block or per rank)");
  }
  std::vector<double> out(static_cast<size_t>(n));
  if (n > 0) err.check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, out.data()), "read attribute");
  return out;
}

std::vector<hsize_t> dataset_shape(const H5Error& err, hid_t dset, const std::string& where) {
  H5Id space(err.check_id(H5Dget_space(dset), "dataspace of " + where));
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > 2) err.fail(where + " has rank " + std::to_string(rank) + ", want 1 or 2");
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

namespace {

struct LinkCheck {
  std::string bad;  // first link that is not a hard link
  H5L_type_t type = H5L_TYPE_HARD;
};

herr_t check_link(hid_t, const char* name, const H5L_info_t* info, void* data) {
  if (info->type == H5L_TYPE_HARD) return 0;
  auto* c = static_cast<LinkCheck*>(data);
  c->bad = name;
  c->type = info->type;
  return 1;  // stop
}

}  // namespace

void require_only_hard_links(const H5Error& err, hid_t file) {
  LinkCheck c;
  err.check(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, check_link, &c), "list the links");
  if (c.bad.empty()) return;
  const std::string kind = c.type == H5L_TYPE_EXTERNAL ? "an external link (to another file)"
                           : c.type == H5L_TYPE_SOFT   ? "a soft link"
                                                       : "a user-defined link";
  err.fail("'/" + c.bad + "' is " + kind +
           "; a trace holds its data itself and no link leaves it (refused before any read)");
}

H5Id open_dataset(const H5Error& err, hid_t loc, const std::string& name) {
  H5Id dset(err.check_id(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "open dataset '" + name + "'"));
  H5Id dcpl(err.check_id(H5Dget_create_plist(dset.get()), "properties of '" + name + "'"));
  const int external = H5Pget_external_count(dcpl.get());
  if (external != 0)
    err.fail("dataset '" + name + "' keeps its data in " +
             (external > 0 ? std::to_string(external) : std::string("unknown")) +
             " external file(s) (HDF5 external storage); a trace holds its data itself "
             "(refused before any read)");
  if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL)
    err.fail("dataset '" + name + "' is a virtual dataset (its data is mapped from other "
             "datasets or files); a trace holds its data itself (refused before any read)");
  return dset;
}

void read_all(const H5Error& err, hid_t loc, const std::string& name, hid_t mem_type, void* out,
              size_t expected_elements) {
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) <= 0) err.fail("missing dataset '" + name + "'");
  H5Id dset = open_dataset(err, loc, name);
  auto dims = dataset_shape(err, dset.get(), "'" + name + "'");
  size_t n = 1;
  for (hsize_t d : dims) n *= d;
  if (n != expected_elements) {
    err.fail("dataset '" + name + "' holds " + std::to_string(n) + " elements, expected " +
             std::to_string(expected_elements));
  }
  if (n == 0) return;
  err.check(H5Dread(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out),
            "read dataset '" + name + "'");
}

namespace {

herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> link_names(const H5Error& err, hid_t group, const std::string& where) {
  // One pass of H5Literate. Asking for the i-th name by index instead (H5Lget_name_by_idx)
  // rebuilds the name index on every call: quadratic, minutes for 20,000 episode groups.
  std::vector<std::string> names;
  hsize_t idx = 0;
  err.check(H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_link, &names),
            "list " + where);
  return names;
}

bool deflate_available() {
  if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0) return false;
  unsigned int config = 0;
  if (H5Zget_filter_info(H5Z_FILTER_DEFLATE, &config) < 0) return false;
  return (config & H5Z_FILTER_CONFIG_ENCODE_ENABLED) != 0;
}

H5Id strategy_string_type(const H5Error& err) {
  H5Id t(err.check_id(H5Tcopy(H5T_C_S1), "copy string type"));
  err.check(H5Tset_size(t.get(), kStrategyStringBytes), "set string size");
  err.check(H5Tset_strpad(t.get(), H5T_STR_NULLPAD), "set string padding");
  return t;
}

Column::Column(const H5Error& err, hid_t loc, const std::string& name, hid_t mem_type,
               hid_t file_type, int width, int deflate_level, hsize_t expected_rows)
    : mem_type_(mem_type), name_(name), width_(width) {
  const int rank = width > 0 ? 2 : 1;
  const hsize_t cols = static_cast<hsize_t>(std::max(width, 1));
  hsize_t dims[2] = {0, cols};
  hsize_t max_dims[2] = {H5S_UNLIMITED, cols};
  const size_t row_bytes = H5Tget_size(file_type) * cols;
  // About 64 KiB per chunk (deflate's set-up cost is per chunk), but no more rows than an
  // episode is expected to have: a chunk is stored (and compressed) at full size.
  hsize_t max_rows = expected_rows > 0 ? std::min<hsize_t>(expected_rows, 1024) : 1024;
  hsize_t chunk_rows = std::clamp<hsize_t>(65536 / std::max<size_t>(row_bytes, 1), 1, max_rows);
  hsize_t chunk[2] = {chunk_rows, cols};
  H5Id space(err.check_id(H5Screate_simple(rank, dims, max_dims), "create dataspace for " + name));
  H5Id dcpl(err.check_id(H5Pcreate(H5P_DATASET_CREATE), "dataset creation properties"));
  err.check(H5Pset_chunk(dcpl.get(), rank, chunk), "set chunk shape");
  if (deflate_level > 0 && deflate_available()) {
    err.check(H5Pset_shuffle(dcpl.get()), "set shuffle filter");
    err.check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(deflate_level)), "set deflate");
  }
  H5Id dapl(err.check_id(H5Pcreate(H5P_DATASET_ACCESS), "dataset access properties"));
  // Appends touch the last chunk only, but a chunk that leaves the cache half-filled is
  // compressed, written, and read back for the next row: room for several chunks; w0 = 1
  // evicts fully written chunks first.
  const size_t chunk_bytes = chunk_rows * row_bytes;
  err.check(H5Pset_chunk_cache(dapl.get(), 521, std::max<size_t>(4 * chunk_bytes, 1 << 18), 1.0),
            "set chunk cache");
  dset_ = H5Id(err.check_id(
      H5Dcreate2(loc, name.c_str(), file_type, space.get(), H5P_DEFAULT, dcpl.get(), dapl.get()),
      "create dataset '" + name + "'"));
  // Reused for every row: the file space follows the extent, the memory space is one row.
  file_space_ = std::move(space);
  hsize_t row[2] = {1, cols};
  mem_space_ = H5Id(err.check_id(H5Screate_simple(rank, row, nullptr), "row dataspace"));
}

void Column::append(const H5Error& err, const void* row) {
  const int rank = width_ > 0 ? 2 : 1;
  const hsize_t cols = static_cast<hsize_t>(std::max(width_, 1));
  hsize_t new_dims[2] = {rows_ + 1, cols};
  hsize_t max_dims[2] = {H5S_UNLIMITED, cols};
  err.check(H5Dset_extent(dset_.get(), new_dims), "extend '" + name_ + "'");
  err.check(H5Sset_extent_simple(file_space_.get(), rank, new_dims, max_dims), "resize dataspace");
  hsize_t start[2] = {rows_, 0};
  hsize_t count[2] = {1, cols};
  err.check(H5Sselect_hyperslab(file_space_.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
            "select row");
  err.check(H5Dwrite(dset_.get(), mem_type_, mem_space_.get(), file_space_.get(), H5P_DEFAULT, row),
            "append to '" + name_ + "'");
  ++rows_;
}

}  // namespace shardgym::h5
