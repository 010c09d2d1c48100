#include "agents/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace shardgym::checkpoint {
namespace {

constexpr char kMagic[8] = {'S', 'G', 'C', 'K', 'P', 'T', '0', '1'};
constexpr char kCrcTag[] = "crc32 ";
constexpr size_t kCrcLine = sizeof(kCrcTag) - 1 + 8 + 1;  // "crc32 " + 8 hex digits + "\n"
constexpr int kMaxRank = 4;

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

std::string errno_text() { return std::strerror(errno); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

// A cursor over the bytes with bounds checks.
struct Cursor {
  std::string_view s;
  size_t at = 0;
  const std::string& where;
  void need(size_t n, const char* what) const {
    if (n > s.size() - at)
      throw std::runtime_error(where + ": truncated at byte " + std::to_string(at) + " (" + what +
                               ")");
  }
  uint64_t uint(size_t n, const char* what) {
    need(n, what);
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
    at += n;
    return v;
  }
  std::string_view bytes(size_t n, const char* what) {
    need(n, what);
    std::string_view out = s.substr(at, n);
    at += n;
    return out;
  }
};

void put_uint(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

uint32_t crc32(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = make_table();
  uint32_t c = 0xFFFFFFFFu;
  for (char ch : bytes) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string read_regular_file(const std::string& path, size_t max_bytes, const std::string& what) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once; fstat then refuses it.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0)
    throw std::runtime_error(what + ": cannot open '" + path + "': " + errno_text());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw std::runtime_error(what + ": cannot stat '" + path + "': " + errno_text());
  if (!S_ISREG(st.st_mode))
    throw std::runtime_error(what + ": '" + path +
                             "' is not a regular file (a FIFO, device, socket or folder)");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw std::runtime_error(what + ": '" + path + "' holds " + std::to_string(st.st_size) +
                             " bytes, more than the " + std::to_string(max_bytes) +
                             " this agent's checkpoint can hold");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(what + ": read from '" + path + "' failed: " + errno_text());
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);  // a file that shrank while read: the CRC check refuses it
  return out;
}

void write_file_atomic(const std::string& path, std::string_view bytes, const std::string& what) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (fd.get() < 0)
    throw std::runtime_error(what + ": cannot open '" + tmp + "' for writing: " + errno_text());
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string err = errno_text();
      ::unlink(tmp.c_str());
      throw std::runtime_error(what + ": write to '" + tmp + "' failed: " + err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || ::close(fd.release()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw std::runtime_error(what + ": cannot flush '" + tmp + "': " + err);
  }
  // rename() replaces a symbolic link at `path` by the file; it never writes through it.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = errno_text();
    ::unlink(tmp.c_str());
    throw std::runtime_error(what + ": cannot rename '" + tmp + "' to '" + path + "': " + err);
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0) ::fsync(dfd.get());  // the rename itself survives a power loss
}

std::string seal_text(const std::string& payload) {
  char line[kCrcLine + 1];
  std::snprintf(line, sizeof line, "%s%08x\n", kCrcTag, crc32(payload));
  return payload + line;
}

std::string unseal_text(const std::string& bytes, const std::string& where) {
  if (bytes.size() < kCrcLine || bytes.compare(bytes.size() - kCrcLine, 6, kCrcTag) != 0 ||
      bytes.back() != '\n')
    throw std::runtime_error(where + ": no CRC line at the end (damaged or truncated)");
  const std::string hex = bytes.substr(bytes.size() - kCrcLine + 6, 8);
  uint32_t want = 0;
  for (char c : hex) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) throw std::runtime_error(where + ": malformed CRC line");
    want = want << 4 | static_cast<uint32_t>(d);
  }
  std::string payload = bytes.substr(0, bytes.size() - kCrcLine);
  if (crc32(payload) != want)
    throw std::runtime_error(where + ": CRC mismatch (the file is damaged)");
  return payload;
}

size_t elem_size(Elem t) {
  switch (t) {
    case Elem::kF32: return 4;
    case Elem::kI64: return 8;
    case Elem::kI32: return 4;
    case Elem::kU8: return 1;
  }
  return 0;
}

int64_t Record::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string RecordFile::encode() const {
  std::string out(kMagic, sizeof kMagic);
  put_uint(out, kind.size(), 4);
  out += kind;
  put_uint(out, records.size(), 4);
  for (const auto& [name, r] : records) {
    put_uint(out, name.size(), 2);
    out += name;
    put_uint(out, static_cast<uint8_t>(r.dtype), 1);
    put_uint(out, r.shape.size(), 1);
    for (int64_t d : r.shape) put_uint(out, static_cast<uint64_t>(d), 8);
    out += r.data;
  }
  put_uint(out, crc32(out), 4);
  return out;
}

RecordFile RecordFile::decode(std::string_view bytes, const std::string& where,
                              size_t max_records) {
  if (bytes.size() < sizeof kMagic + 4 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw std::runtime_error(where + ": not a ShardGym record checkpoint (bad magic)");
  const std::string_view body = bytes.substr(0, bytes.size() - 4);
  Cursor tail{bytes, bytes.size() - 4, where};
  if (crc32(body) != static_cast<uint32_t>(tail.uint(4, "crc")))
    throw std::runtime_error(where + ": CRC mismatch (the file is damaged)");
  Cursor c{body, sizeof kMagic, where};
  RecordFile f;
  const uint64_t kind_len = c.uint(4, "kind length");
  if (kind_len > 64) throw std::runtime_error(where + ": kind name too long");
  f.kind = std::string(c.bytes(kind_len, "kind"));
  const uint64_t count = c.uint(4, "record count");
  if (count > max_records)
    throw std::runtime_error(where + ": " + std::to_string(count) + " records, more than the " +
                             std::to_string(max_records) + " expected");
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t name_len = c.uint(2, "name length");
    std::string name(c.bytes(name_len, "name"));
    Record r;
    const uint64_t dt = c.uint(1, "dtype");
    if (dt < 1 || dt > 4)
      throw std::runtime_error(where + ": record '" + name + "' has unknown dtype " +
                               std::to_string(dt));
    r.dtype = static_cast<Elem>(dt);
    const uint64_t rank = c.uint(1, "rank");
    if (rank > kMaxRank)
      throw std::runtime_error(where + ": record '" + name + "' has rank " + std::to_string(rank));
    // The data must fit in what is left of the file: bound the product as it grows.
    const uint64_t left = body.size() - c.at;
    uint64_t numel = 1;
    for (uint64_t d = 0; d < rank; ++d) {
      const uint64_t dim = c.uint(8, "dimension");
      if (dim > left || (dim != 0 && numel > left / dim))
        throw std::runtime_error(where + ": record '" + name + "' is larger than the file");
      numel *= dim;
      r.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t size = numel * elem_size(r.dtype);
    if (numel > left || size / elem_size(r.dtype) != numel)
      throw std::runtime_error(where + ": record '" + name + "' is larger than the file");
    r.data = std::string(c.bytes(size, "record data"));
    if (!f.records.emplace(name, std::move(r)).second)
      throw std::runtime_error(where + ": record '" + name + "' appears twice");
  }
  if (c.at != body.size())
    throw std::runtime_error(where + ": " + std::to_string(body.size() - c.at) +
                             " bytes after the last record");
  return f;
}

void RecordFile::put(const std::string& name, Elem dtype, std::vector<int64_t> shape,
                     const void* data) {
  Record r;
  r.dtype = dtype;
  r.shape = std::move(shape);
  const size_t size = static_cast<size_t>(r.numel()) * elem_size(dtype);
  r.data.assign(static_cast<const char*>(data), size);
  records[name] = std::move(r);
}

const Record& RecordFile::get(const std::string& name, Elem dtype,
                              const std::vector<int64_t>& shape, const std::string& where) const {
  auto it = records.find(name);
  if (it == records.end()) throw std::runtime_error(where + ": record '" + name + "' is missing");
  if (it->second.dtype != dtype || it->second.shape != shape)
    throw std::runtime_error(where + ": record '" + name + "' has shape " +
                             shape_text(it->second.shape) + " (dtype " +
                             std::to_string(static_cast<int>(it->second.dtype)) +
                             "); this agent's config needs " + shape_text(shape) + " (dtype " +
                             std::to_string(static_cast<int>(dtype)) + ")");
  return it->second;
}

template <typename T>
std::vector<T> RecordFile::vec(const std::string& name, Elem dtype, int64_t max_numel,
                               const std::string& where) const {
  auto it = records.find(name);
  if (it == records.end()) throw std::runtime_error(where + ": record '" + name + "' is missing");
  const Record& r = it->second;
  if (r.dtype != dtype || r.shape.size() != 1 || elem_size(dtype) != sizeof(T))
    throw std::runtime_error(where + ": record '" + name + "' is not a flat array of the right type");
  if (r.shape[0] > max_numel)
    throw std::runtime_error(where + ": record '" + name + "' holds " +
                             std::to_string(r.shape[0]) + " entries, more than the " +
                             std::to_string(max_numel) + " this agent's config allows");
  std::vector<T> out(static_cast<size_t>(r.shape[0]));
  if (!out.empty()) std::memcpy(out.data(), r.data.data(), out.size() * sizeof(T));
  return out;
}

template std::vector<float> RecordFile::vec<float>(const std::string&, Elem, int64_t,
                                                   const std::string&) const;
template std::vector<int64_t> RecordFile::vec<int64_t>(const std::string&, Elem, int64_t,
                                                       const std::string&) const;
template std::vector<int32_t> RecordFile::vec<int32_t>(const std::string&, Elem, int64_t,
                                                       const std::string&) const;
template std::vector<uint8_t> RecordFile::vec<uint8_t>(const std::string&, Elem, int64_t,
                                                       const std::string&) const;

void require_finite(const Record& r, const std::string& name, const std::string& where) {
  if (r.dtype != Elem::kF32) return;
  const size_t n = r.data.size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, r.data.data() + i * sizeof v, sizeof v);
    if (!std::isfinite(v))
      throw std::runtime_error(where + ": record '" + name + "' holds a non-finite number");
  }
}

}  // namespace shardgym::checkpoint
