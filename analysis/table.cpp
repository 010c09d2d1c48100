#include "analysis/table.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace shardgym {
namespace {

std::string pad(const std::string& s, int width, Align align) {
  const int fill = std::max(0, width - display_width(s));
  return align == Align::kLeft ? s + std::string(fill, ' ') : std::string(fill, ' ') + s;
}

std::string escape_markdown(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

int display_width(const std::string& s) {
  int n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;  // count lead bytes, skip continuation bytes
  }
  return n;
}

Table::Table(std::vector<std::string> headers)
    : headers_(std::move(headers)), align_(headers_.size(), Align::kLeft) {
  if (headers_.empty()) throw std::invalid_argument("Table: needs at least one column");
}

void Table::set_align(int column, Align align) { align_.at(column) = align; }

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != headers_.size()) {
    throw std::invalid_argument("Table: row has " + std::to_string(cells.size()) +
                                " cells, header has " + std::to_string(headers_.size()));
  }
  rows_.push_back(std::move(cells));
}

std::string Table::render(TableFormat format) const {
  std::ostringstream os;
  if (format == TableFormat::kMarkdown) {
    auto line = [&](const std::vector<std::string>& cells) {
      os << "|";
      for (const auto& c : cells) os << " " << escape_markdown(c) << " |";
      os << "\n";
    };
    line(headers_);
    os << "|";
    for (Align a : align_) os << (a == Align::kRight ? "---:|" : "---|");
    os << "\n";
    for (const auto& r : rows_) line(r);
    return os.str();
  }
  std::vector<int> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = display_width(headers_[c]);
    for (const auto& r : rows_) width[c] = std::max(width[c], display_width(r[c]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      text += (c ? "  " : "") + pad(cells[c], width[c], align_[c]);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    os << text << "\n";
  };
  line(headers_);
  int total = 0;
  for (size_t c = 0; c < width.size(); ++c) total += width[c] + (c ? 2 : 0);
  os << std::string(total, '-') << "\n";
  for (const auto& r : rows_) line(r);
  return os.str();
}

}  // namespace shardgym
