#include "lib/experiments/repro_templates.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

const std::string kMarker = "<!-- template: ", kMarkerEnd = " -->";

}  // namespace

fs::path report_templates_file(const std::string& manifest_path) {
  return fs::path(manifest_path).parent_path() / "report_templates.md";
}

ReportTemplates ReportTemplates::load(const fs::path& file, const std::vector<std::string>& names) {
  if (!fs::exists(fs::symlink_status(file)))
    fail("{}: not found: the report's templates, beside the manifest (experiments/reproduce/report_templates.md "
         "is the project's; copy it beside yours)", file.string());
  return parse(read_file(file), file.string(), names);
}

ReportTemplates ReportTemplates::parse(const std::string& text, const std::string& file,
                                       const std::vector<std::string>& names) {
  ReportTemplates t;
  t.file_ = file;
  std::string* current = nullptr;  // the template being read; nullptr before the first one
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const size_t next = end == std::string::npos ? text.size() : end + 1;
    const std::string line = text.substr(pos, next - pos);
    ++line_no;
    if (line.rfind(kMarker, 0) == 0) {
      const std::string body = line.substr(0, line.find_last_not_of("\r\n") + 1);
      if (body.size() < kMarker.size() + kMarkerEnd.size() ||
          body.compare(body.size() - kMarkerEnd.size(), kMarkerEnd.size(), kMarkerEnd) != 0)
        fail("{}:{}: expected `<!-- template: NAME -->`", file, line_no);
      const std::string name = body.substr(kMarker.size(), body.size() - kMarker.size() - kMarkerEnd.size());
      if (std::find(names.begin(), names.end(), name) == names.end())
        fail("{}:{}: unknown template '{}' (templates: {})", file, line_no, name, fmt::join(names, ", "));
      if (t.texts_.count(name)) fail("{}:{}: template '{}' given twice", file, line_no, name);
      current = &t.texts_[name];
    } else if (current) {
      *current += line;
    }
    pos = next;
  }
  for (const std::string& name : names)
    if (!t.texts_.count(name)) fail("{}: no template '{}' (the report needs: {})", file, name, fmt::join(names, ", "));
  return t;
}

std::string replace_placeholders(const std::string& text, const std::string& where,
                                 const std::function<std::string(const std::string& inner)>& value) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    const size_t close = text.find("}}", open + 2);
    if (close == std::string::npos) fail("{}: '{{{{' without its '}}}}'", where);
    out += text.substr(pos, open - pos) + value(text.substr(open + 2, close - open - 2));
    pos = close + 2;
  }
  return out + text.substr(pos);
}

std::string ReportTemplates::render(const std::string& name,
                                    const std::vector<std::pair<std::string, std::string>>& values) const {
  const auto found = texts_.find(name);
  if (found == texts_.end()) fail("{}: no template '{}'", file_, name);
  const std::string& text = found->second;
  std::vector<std::string> keys;
  for (const auto& [key, value] : values) keys.push_back(key);
  std::set<std::string> used;
  const std::string out =
      replace_placeholders(text, fmt::format("{}: template '{}'", file_, name), [&](const std::string& key) {
        const auto value = std::find_if(values.begin(), values.end(), [&](const auto& kv) { return kv.first == key; });
        if (value == values.end())
          fail("{}: template '{}': unknown placeholder {{{{{}}}}} (it can use: {})", file_, name, key,
               fmt::join(keys, ", "));
        used.insert(key);
        return value->second;
      });
  for (const std::string& key : keys)
    if (!used.count(key))
      fail("{}: template '{}' leaves out {{{{{}}}}}, which the report needs there", file_, name, key);
  return out;
}

}  // namespace rmt
