// Strategy families (docs/design.md §3): everything that differs between dp, tp1d and tp2d
// lives in one file per family (family_dp.cpp, family_tp1d.cpp, family_tp2d.cpp), and the
// rest of the project asks the family: the notation (strategy.cpp), validity and catalog
// entries (catalog.cpp), the rank mesh behind placement and communication groups
// (cost.cpp comm_group, placement.cpp), collectives, parameters and activation memory
// (cost.cpp), the simulator's canonical keys (runtime/sim/layout.cpp), the observation's
// per-block features (env/partition_env.cpp) and the baselines (agents/baselines.cpp).
//
// Adding a kind: a StrategyKind value (strategy.h), one family file implementing this
// interface, its line in strategy_families() (strategy_family.cpp) and in the core library's
// CMakeLists, and the family's case in the conformance test
// (tests/sim/strategy_family_test.cpp), which checks every registered family alike.
//
// Length: the family interface with the small value types its answers use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/core/cost.h"
#include "runtime/core/model_spec.h"
#include "runtime/core/strategy.h"

namespace shardgym {

struct CatalogOptions;

// The tensor group of one copy of a block as a d1 × d2 mesh (cost.h comm_group): with
// row_first, local rank = i·d2 + j (d2's ranks consecutive), else j·d1 + i. A 1D split of
// degree t is the mesh t × 1; dp is 1 × 1. GEMM inputs are sharded over d2 and outputs over
// d1 (ATP's notation; Megatron 1D is its d2 = 1 case).
struct Mesh {
  int d1 = 1, d2 = 1;
  bool row_first = true;
};

// A block's parameter terms before any split (cost.cpp block_rank_params): the norm, the
// input GEMM's (QKV or fc1) weight and bias, the output GEMM's (proj or fc2) weight and bias.
struct BlockParamTerms {
  double norm = 0, in_w = 0, in_b = 0, out_w = 0, out_b = 0;
  bool attention = false;
};

// A block's stored activations before any split, in Korthikanti et al.'s units of s·b·h and
// a·s²·b (cost.cpp block_activation_bytes): `edge` the norm, dropout and residual terms,
// `qkv` and `proj` the head-split attention tensors, `mlp` the MLP's column-split tensors,
// `scores` the a·s²·b terms (0 when none are kept).
struct ActivationTerms {
  double sbh = 0, as2b = 0;
  double edge = 0, qkv = 0, proj = 2, mlp = 0, scores = 0;
  double t = 1, th = 1;  // the degree, and the head-split terms' divisor (uneven: t / part)
  bool attention = false;
};

// Reading a strategy's text (strategy.cpp parse): the whole text for messages, and a family's
// scratch for options that are checked together once all are read (tp1d's heads=).
struct StrategyText {
  std::string text;
  std::vector<int> heads;

  [[noreturn]] void fail(const std::string& why) const;  // std::invalid_argument
  int parse_int(const std::string& key, const std::string& value) const;
  bool parse_flag(const std::string& key, const std::string& value) const;
};

class StrategyFamily {
 public:
  virtual ~StrategyFamily() = default;

  virtual StrategyKind kind() const = 0;
  virtual const char* name() const = 0;  // the notation's prefix: dp, tp1d, tp2d

  // Notation. `given` lists the option keys of the text; `require` fails when one this family
  // needs is missing; `parse_option` takes one key=value of the family (false: not its key);
  // `finish` checks the options together. `print` appends the family's options in a fixed
  // order (the shared chunks= and recompute= follow them).
  virtual void require(const std::vector<std::string>& given, const StrategyText& t) const;
  virtual bool parse_option(Strategy& s, const std::string& key, const std::string& value,
                            StrategyText& t) const;
  virtual void finish(Strategy& s, const StrategyText& t) const;
  virtual void print(const Strategy& s, std::vector<std::string>& options) const;
  // Whether the family's fields of a and b are equal (kind, chunks and recompute aside).
  virtual bool same(const Strategy& a, const Strategy& b) const = 0;

  // Shape.
  virtual int degree(const Strategy& s) const = 0;
  virtual Mesh mesh(const Strategy& s) const = 0;
  // Megatron's sequence parallelism: the residual stream split by sequence over the group.
  virtual bool sequence_parallel(const Strategy&) const { return false; }
  // What divides the residual stream's elements on a rank (sp: t, tp2d: d2 over the hidden).
  virtual double residual_divisor(const Strategy&) const { return 1; }
  // Whether an uneven head split (Strategy::heads) is the family's to have.
  virtual bool splits_heads_unevenly() const { return false; }
  // Whether ATP's planner (Cheng et al. 2023) considers the family's uniform meshes.
  virtual bool atp_mesh() const { return false; }

  // Why s does not fit a block of m on `world` ranks beyond the checks every family shares
  // (degree, replicas, batch: catalog.cpp); empty when it fits.
  virtual std::string invalid_reason(const Strategy& s, const ModelSpec& m, BlockKind kind,
                                     int world) const = 0;
  // The family's catalog entries for `world` ranks up to `max_degree` (catalog.h), in order.
  virtual void catalog_entries(const ModelSpec& m, int world, int max_degree,
                               const CatalogOptions& o, std::vector<Strategy>& out) const = 0;

  // Costs (cost.h). The tensor collectives of a block over n tokens per replica; the rank at
  // group position `pos`'s parameters given the unsplit terms (`part`: its head-split work
  // over the even split's, strategy.h); the stored activations of the block, unrecomputed.
  virtual void collectives(std::vector<Collective>& out, const ModelSpec& m, BlockKind kind,
                           const Strategy& s, double n) const = 0;
  virtual double rank_params(const BlockParamTerms& p, const Strategy& s, double part) const = 0;
  virtual double stored_activation_units(const ActivationTerms& a, const Strategy& s) const = 0;

  // The simulator's canonical key of the family's fields (runtime/sim/layout.cpp strategy_key
  // adds kind, chunks and recomputation): two numbers below 2^20 and two flags, named as data
  // by the family's constructor (so the hot path reads fields, no virtual call), injective on
  // the family's strategies (checked by the conformance test). kNoKey: a number too large.
  enum class Field : uint8_t { kNone, kT, kD1, kD2, kHeadsId, kSp, kRowFirst };
  static constexpr uint64_t kNoKey = ~uint64_t(0);
  uint64_t key(const Strategy& s) const {
    const uint64_t a = read(s, key_[0]), b = read(s, key_[1]);
    if (a >= (1u << 20) || b >= (1u << 20)) return kNoKey;
    return a | b << 20 | read(s, key_[2]) << 40 | read(s, key_[3]) << 41;
  }

  // The observation's per-block kind features (partition_env.h): one-dimensional tensor
  // split, two-dimensional mesh.
  virtual void kind_features(float out[2]) const { out[0] = out[1] = 0.0f; }

 protected:
  StrategyFamily(Field a, Field b, Field flag0, Field flag1)
      : key_{slot(a), slot(b), slot(flag0), slot(flag1)} {}

 private:
  // A field as (byte offset in Strategy, mask): read without a branch on the hot path
  // (SimRun::resolve keys every block of every step). kNone reads t under a zero mask.
  struct Slot {
    uint32_t offset;
    uint32_t mask;
  };
  static Slot slot(Field f) {
    switch (f) {
      case Field::kNone: return {offsetof(Strategy, t), 0};
      case Field::kT: return {offsetof(Strategy, t), ~0u};
      case Field::kD1: return {offsetof(Strategy, d1), ~0u};
      case Field::kD2: return {offsetof(Strategy, d2), ~0u};
      case Field::kHeadsId: return {offsetof(Strategy, heads_id), ~0u};
      case Field::kSp: return {offsetof(Strategy, sp), 1u};
      case Field::kRowFirst: return {offsetof(Strategy, row_first), 1u};
    }
    return {offsetof(Strategy, t), 0};
  }
  static uint64_t read(const Strategy& s, Slot f) {
    // 1-byte fields (bools) are read alone: a 4-byte read could pass the struct's end.
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&s) + f.offset;
    uint32_t v = 0;
    if (f.mask == 1u) return *p & 1u;
    std::memcpy(&v, p, sizeof v);
    return v & f.mask;
  }
  Slot key_[4];
};

// Every family, in StrategyKind order (the catalog lists their entries in this order).
const std::vector<const StrategyFamily*>& strategy_families();
// A plain table lookup, inline: it is on the simulator's hot path (degree(), ==, keys). That
// the registry is in StrategyKind order is checked by tests/sim/strategy_family_test.cpp.
inline const StrategyFamily& family_of(StrategyKind kind) {
  static const StrategyFamily* const* const table = strategy_families().data();
  return *table[static_cast<size_t>(kind)];
}
inline const StrategyFamily& family_of(const Strategy& s) { return family_of(s.kind); }
const StrategyFamily* family_named(const std::string& name);  // nullptr when none

// Appends `chunks` collectives of x/chunks elements each; a group of one rank or nothing to
// move adds none (cost.cpp and the families share it).
void add_collective(std::vector<Collective>& out, CollOp op, CommAxis axis, int group, double x,
                    bool fwd, const char* what, int chunks, bool under_wgrad = false);

}  // namespace shardgym
