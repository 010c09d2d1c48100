// A check of HDF5 global heap collections, made on the file's bytes before HDF5 parses them.
//
// Why: HDF5 1.10 trusts the object headers of a global heap collection (where every
// variable-length string lives). An object of size 0 makes its parse loop forever; one whose
// size runs past its collection makes it copy out of bounds. Both are one flipped bit away
// from any trace. The reader parses in a child process that a watchdog stops (isolated_read.h),
// so neither can take the reader down, but each costs a crash or a full timeout; this check
// refuses such a file at once, by name, before any child starts.
//
// What it checks: every place in the file that starts like a collection ("GCOL", version 1) is
// read as one: its size must fit in the file, and its objects, walked as HDF5 walks them, must
// tile it exactly (each object's header and padded data inside the collection, a free-space
// object at least one header long). That is exactly what makes HDF5's walk end and stay inside
// the collection. It does not check which objects the file's attributes refer to; the child
// still contains whatever else a crafted file can do.
//
// False refusals: the 5 bytes "GCOL\x01" inside other data (compressed data is effectively
// random: one chance in 2^40 per byte) would have to be followed by sizes that do not tile.
// Cost: one sequential read of the file (2 ms for a 32 KB trace, about 1 s per GB).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace shardgym {

// Reads `size` bytes at `offset` into `out`; returns how many it read (fewer only at the end).
using ReadAt = std::function<size_t(uint64_t offset, char* out, size_t size)>;

// "" when every collection is well formed, else what is wrong and where (byte offsets).
std::string check_global_heaps(uint64_t file_size, const ReadAt& read_at);
std::string check_global_heaps(std::string_view bytes);
// Opens and reads the file; an unreadable file is reported the same way.
std::string check_global_heaps_of_file(const std::string& path);

}  // namespace shardgym
