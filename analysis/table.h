// Table: rows of text cells rendered as an aligned plain-text table (terminals, logs) or a
// GitHub markdown table (README "Results", docs). Used by `shardgym train`'s summary and by
// the agent comparison (analysis/compare.h), so every table the project prints looks alike.
//
//   Table t({"agent", "throughput"});
//   t.set_align(1, Align::kRight);
//   t.add_row({"ppo", "1.12 [1.08, 1.15]"});
//   std::cout << t.render(TableFormat::kText);
#pragma once

#include <string>
#include <vector>

namespace shardgym {

enum class TableFormat { kText, kMarkdown };
enum class Align { kLeft, kRight };

// x with `digits` digits after the point ("%.*f"): the one number format of cells and lines.
std::string fixed(double x, int digits);

class Table {
 public:
  explicit Table(std::vector<std::string> headers);

  void set_align(int column, Align align);
  // Throws std::invalid_argument when the row's width differs from the header's.
  void add_row(std::vector<std::string> cells);

  int rows() const { return static_cast<int>(rows_.size()); }
  int columns() const { return static_cast<int>(headers_.size()); }
  const std::vector<std::string>& row(int i) const { return rows_.at(i); }

  // Text: columns padded to their widest cell (UTF-8 aware), a dashed rule under the header.
  // Markdown: `| a | b |` rows, `|---|--:|` alignment row; '|' in cells is escaped.
  std::string render(TableFormat format) const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

// Number of terminal columns a UTF-8 string takes (one per code point).
int display_width(const std::string& s);

}  // namespace shardgym
