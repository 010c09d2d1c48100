#include "datasets/global_heap_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace shardgym {

namespace {

// The layout below is HDF5's file format specification, "Global Heap" (III.E): a collection is
// "GCOL", version 1, 3 reserved bytes and its size (a length: `L` bytes, the superblock's
// "size of lengths"); its header is padded to 8 bytes. Each object is a 2-byte index, a
// 2-byte reference count, 4 reserved bytes and its size (L bytes), then its data padded to 8
// bytes; index 0 is the free space, whose size includes its header and is not padded.
constexpr char kMagic[] = {'G', 'C', 'O', 'L', 1};
constexpr size_t kMagicBytes = sizeof kMagic;
constexpr uint64_t kAlign = 8;

uint64_t align8(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

uint64_t little_endian(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The superblock's "size of lengths" (2, 4 or 8), or 0 when the file has no superblock this
// check understands (HDF5 then refuses the file itself, or it has no global heap to worry
// about). The superblock sits at 0, 512, 1024, 2048, ... (a user block may precede it).
int size_of_lengths(uint64_t file_size, const ReadAt& read_at) {
  static const unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  for (uint64_t at = 0; at + 16 <= file_size; at = at ? at * 2 : 512) {
    unsigned char sb[16];
    if (read_at(at, reinterpret_cast<char*>(sb), sizeof sb) != sizeof sb) return 0;
    if (std::memcmp(sb, kSignature, 8) != 0) continue;
    const int version = sb[8];
    // Versions 0 and 1: five version bytes, then the sizes of offsets and of lengths;
    // versions 2 and 3: the two sizes right after the version.
    const int lengths = version <= 1 ? sb[14] : sb[10];
    return lengths == 2 || lengths == 4 || lengths == 8 ? lengths : 0;
  }
  return 0;
}

std::string at_text(uint64_t offset) { return "at byte " + std::to_string(offset); }

// Walks the collection at `start` as HDF5 does; "" when its objects tile it.
std::string check_collection(uint64_t start, uint64_t file_size, int L, const ReadAt& read_at) {
  const uint64_t header = align8(8 + L), object_header = 8 + L;
  unsigned char buf[16];
  if (start + header > file_size || read_at(start, reinterpret_cast<char*>(buf), 8 + L) !=
                                        static_cast<size_t>(8 + L)) {
    return "global heap collection " + at_text(start) + " is cut off by the end of the file";
  }
  const uint64_t size = little_endian(buf + 8, L);
  if (size < header || size > file_size - start) {
    return "global heap collection " + at_text(start) + " declares " + std::to_string(size) +
           " bytes, but " + std::to_string(file_size - start) +
           " are left in the file and its header alone needs " + std::to_string(header);
  }
  const uint64_t end = start + size;
  for (uint64_t p = start + header; p < end;) {
    if (end - p < object_header) break;  // too small for an object: HDF5 counts it as free
    if (read_at(p, reinterpret_cast<char*>(buf), object_header) != object_header) {
      return "global heap collection " + at_text(start) + " cannot be read " + at_text(p);
    }
    const unsigned index = static_cast<unsigned>(little_endian(buf, 2));
    const uint64_t object_size = little_endian(buf + 8, L);
    const uint64_t left = end - p;
    // The free-space object's size includes its header; a data object's does not.
    const bool fits = index == 0 ? object_size >= object_header && object_size <= left
                                 : object_size <= left - object_header &&
                                       object_header + align8(object_size) <= left;
    if (!fits) {
      return "global heap collection " + at_text(start) + ": object " + std::to_string(index) +
             " " + at_text(p) + " declares " + std::to_string(object_size) + " bytes, but " +
             std::to_string(left) + " are left in the collection" +
             (index == 0 && object_size < object_header ? " and a free-space object is at least "
                                                              "its " +
                                                              std::to_string(object_header) +
                                                              "-byte header"
                                                        : "");
    }
    p += index == 0 ? object_size : object_header + align8(object_size);
  }
  return "";
}

}  // namespace

std::string check_global_heaps(uint64_t file_size, const ReadAt& read_at) {
  const int L = size_of_lengths(file_size, read_at);
  if (L == 0) return "";
  // Scan in windows that overlap by the magic's length less one byte, so that no occurrence
  // straddling two windows is missed.
  constexpr size_t kWindow = 1 << 20;
  std::vector<char> window(kWindow);
  for (uint64_t base = 0; base < file_size;) {
    const size_t got = read_at(base, window.data(), std::min<uint64_t>(kWindow, file_size - base));
    if (got < kMagicBytes) break;
    const char* begin = window.data();
    const char* const stop = begin + got;
    for (const char* hit = begin;
         (hit = std::search(hit, stop, kMagic, kMagic + kMagicBytes)) != stop; ++hit) {
      std::string why = check_collection(base + static_cast<uint64_t>(hit - begin), file_size, L,
                                         read_at);
      if (!why.empty()) return why;
    }
    if (base + got >= file_size) break;
    base += got - (kMagicBytes - 1);
  }
  return "";
}

std::string check_global_heaps(std::string_view bytes) {
  return check_global_heaps(bytes.size(), [&](uint64_t offset, char* out, size_t size) {
    if (offset >= bytes.size()) return size_t{0};
    const size_t n = std::min<uint64_t>(size, bytes.size() - offset);
    std::memcpy(out, bytes.data() + offset, n);
    return n;
  });
}

std::string check_global_heaps_of_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::string("cannot open it: ") + std::strerror(errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "is not a regular file";
  }
  std::string failure;
  const std::string why =
      check_global_heaps(static_cast<uint64_t>(st.st_size), [&](uint64_t offset, char* out,
                                                                 size_t size) {
        size_t done = 0;
        while (done < size) {
          const ssize_t n = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n < 0 && failure.empty()) failure = std::string("cannot read it: ") + strerror(errno);
          if (n <= 0) break;
          done += static_cast<size_t>(n);
        }
        return done;
      });
  ::close(fd);
  return failure.empty() ? why : failure;
}

}  // namespace shardgym
