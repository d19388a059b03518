// Reading and writing CSV (results_table.h): results.csv as a sweep writes it.
#include "lib/experiments/results_table.h"

#include <algorithm>

#include <fmt/format.h>

#include "lib/core/error.h"

namespace rmt {

int CsvTable::column(const std::string& name) const {
  auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : int(it - header.begin());
}

CsvTable parse_csv(const std::string& text, const std::string& origin) {
  std::vector<std::vector<std::string>> records;
  std::vector<int> record_lines;  // the line each record starts on (quoted fields may span lines)
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, after_quote = false, any = false;
  int line = 1, record_line = 1, quote_line = 1;
  auto end_record = [&] {
    record.push_back(field), field.clear();
    records.push_back(record), record.clear();
    record_lines.push_back(record_line);
    any = after_quote = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (ch == '"') quoted = false, after_quote = true;
      else field += ch;
      if (ch == '\n') ++line;
    } else if (ch == ',') {
      record.push_back(field), field.clear(), any = true, after_quote = false;
    } else if (ch == '\n') {
      end_record();
      record_line = ++line;
    } else if (ch == '\r' && (i + 1 == text.size() || text[i + 1] == '\n')) {
      // CRLF line ends
    } else if (after_quote) {
      fail("{}: line {}: unexpected '{}' after a closing quote (a quote inside a quoted field is written \"\")",
           origin, line, ch);
    } else if (ch == '"') {
      if (!field.empty())
        fail("{}: line {}: a quote in the middle of an unquoted field (quote the whole field)", origin, line);
      quoted = true, any = true, quote_line = line;
    } else {
      field += ch, any = true;
    }
  }
  if (quoted) fail("{}: line {}: a quoted field is never closed", origin, quote_line);
  if (any || !field.empty()) end_record();
  if (records.empty()) fail("{}: empty file (expected a results.csv header)", origin);
  CsvTable csv;
  csv.header = records[0];
  for (size_t c = 0; c < csv.header.size(); ++c) {
    if (csv.header[c].empty()) fail("{}: line 1: column {} of the header has no name", origin, c + 1);
    for (size_t d = 0; d < c; ++d)
      if (csv.header[d] == csv.header[c]) fail("{}: line 1: column '{}' appears twice in the header", origin, csv.header[c]);
  }
  // A language-model sweep's file has a bpc column that an algorithmic one lacks (it comes before
  // run_id and status): a row one field apart that way whose status sits one column off is one
  // family's row in the other's file, and is named as such rather than by its field count.
  const bool lm_header = csv.column("bpc") >= 0;
  const int c_status = csv.column("status"), c_run_id = csv.column("run_id");
  const int shift = lm_header ? -1 : 1;  // where a column after bpc sits in the other family's row
  auto is_status = [](const std::string& f) { return f == "done" || f == "failed"; };
  for (size_t r = 1; r < records.size(); ++r) {
    const std::vector<std::string>& row = records[r];
    if (row.size() != csv.header.size()) {
      if (c_status > 0 && row.size() == csv.header.size() + shift && is_status(row[size_t(c_status + shift)])) {
        const bool run_id_shifted = c_run_id > csv.column("bpc") && c_run_id < c_status;  // rmt's layout
        const std::string run = run_id_shifted ? fmt::format(" (run_id '{}')", row[size_t(c_run_id + shift)]) : "";
        fail("{}: mixes language-model and algorithmic rows: line {}{} is {} row ({} bpc) in a file of {} runs; a "
             "results.csv holds one family: table each from its own", origin, record_lines[r], run,
             lm_header ? "an algorithmic run's" : "a language-model run's", lm_header ? "without" : "with",
             lm_header ? "language-model" : "algorithmic");
      }
      fail("{}: line {} has {} fields, the header has {}", origin, record_lines[r], row.size(), csv.header.size());
    }
    csv.rows.push_back(records[r]);
    csv.row_lines.push_back(record_lines[r]);
  }
  return csv;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

}  // namespace rmt
