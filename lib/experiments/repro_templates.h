#pragma once
// The report's prose (REPORT.md's fixed paragraphs), read from a template file beside the
// manifest (experiments/reproduce/report_templates.md) rather than written in C++.
//
// The file is a list of templates, each begun by a line `<!-- template: NAME -->`; a template's
// text is every byte after that line up to the next such line (or the end of the file), blank
// lines included, so the file reads as the report does. Text before the first template line is
// a comment for the reader. In a template, `{{key}}` is replaced by the value the report gives
// for it. A template the report needs that the file lacks, a template it does not know, a key
// the template names that the report does not give, and a value the report gives that the
// template leaves out are errors naming the file and the template.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace rmt {

class ReportTemplates {
 public:
  // Reads `file`, which must hold exactly the templates `names`.
  static ReportTemplates load(const std::filesystem::path& file, const std::vector<std::string>& names);
  // The same from text already read (`file` names it in errors).
  static ReportTemplates parse(const std::string& text, const std::string& file, const std::vector<std::string>& names);

  // Template `name` with each {{key}} replaced by its value.
  std::string render(const std::string& name, const std::vector<std::pair<std::string, std::string>>& values) const;

 private:
  std::string file_;
  std::map<std::string, std::string> texts_;
};

// `text` with every `{{inner}}` replaced by value(inner), in order; an opening `{{` without its
// `}}` fails naming `where`. The one scanner of placeholders: templates and readings.
std::string replace_placeholders(const std::string& text, const std::string& where,
                                 const std::function<std::string(const std::string& inner)>& value);

// Where the templates of `manifest_path` are: report_templates.md in the manifest's directory.
std::filesystem::path report_templates_file(const std::string& manifest_path);

}  // namespace rmt
