// Checkpoint files are untrusted input (docs/robustness.md, "Checkpoints"): reading one runs
// no code, reads only a regular file (a FIFO or device is refused before it is opened for
// reading, so nothing blocks), never more bytes than the caller's cap (what the agent's config
// implies), and checks a CRC-32 over the payload before anything is parsed. Writing goes
// through a temporary file in the same folder, fsync and rename, so a kill leaves either the
// previous checkpoint or the new one, and a symbolic link at the destination is replaced, not
// followed.
//
// Two layouts use it. Text checkpoints (Agent::save's default) end in a line
// "crc32 XXXXXXXX\n" over everything before it. Record checkpoints (PPO) are a header, named
// arrays and a trailing CRC (RecordFile below); they hold numbers only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace shardgym::checkpoint {

uint32_t crc32(std::string_view bytes);

// The whole file at `path`, refused (std::runtime_error naming `what` and the path) when it
// is not a regular file or holds more than `max_bytes`.
std::string read_regular_file(const std::string& path, size_t max_bytes, const std::string& what);

// Writes `bytes` to `path` atomically: `path`.tmp-<pid> in the same folder, fsync, rename,
// fsync of the folder. Throws std::runtime_error naming `what` and the path.
void write_file_atomic(const std::string& path, std::string_view bytes, const std::string& what);

// Text layout: `payload` + "crc32 XXXXXXXX\n".
std::string seal_text(const std::string& payload);
// The payload of a sealed text, or throws naming `where` when the trailer is missing or
// the CRC does not match.
std::string unseal_text(const std::string& bytes, const std::string& where);

// Record layout (little-endian):
//   "SGCKPT01" | u32 kind length | kind | u32 record count |
//   per record: u16 name length | name | u8 dtype | u8 rank | u64 dims[rank] | data |
//   u32 CRC-32 of everything before it.
enum class Elem : uint8_t { kF32 = 1, kI64 = 2, kI32 = 3, kU8 = 4 };
size_t elem_size(Elem t);

struct Record {
  Elem dtype = Elem::kF32;
  std::vector<int64_t> shape;
  std::string data;  // shape's product × elem_size bytes
  int64_t numel() const;
};

struct RecordFile {
  std::string kind;  // what the file holds, e.g. "ppo"
  std::map<std::string, Record> records;

  std::string encode() const;
  // Parses and checks the layout: magic, CRC, lengths within the bytes, no duplicate names,
  // at most `max_records`, every dimension ≥ 0 and the data size matching. Throws
  // std::runtime_error naming `where`.
  static RecordFile decode(std::string_view bytes, const std::string& where, size_t max_records);

  void put(const std::string& name, Elem dtype, std::vector<int64_t> shape, const void* data);
  // The record `name`, checked to have this dtype and exactly this shape; throws naming
  // `where` and the record.
  const Record& get(const std::string& name, Elem dtype, const std::vector<int64_t>& shape,
                    const std::string& where) const;
  // The record as a flat vector, of any length in [0, max_numel] (rank 1).
  template <typename T>
  std::vector<T> vec(const std::string& name, Elem dtype, int64_t max_numel,
                     const std::string& where) const;
  bool has(const std::string& name) const { return records.count(name) != 0; }
};

// Every float of the record is finite; throws naming `where` and the record.
void require_finite(const Record& r, const std::string& name, const std::string& where);

}  // namespace shardgym::checkpoint
