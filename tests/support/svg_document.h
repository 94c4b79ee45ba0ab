#pragma once
// Checks every SVG picture must pass (tests of train/report/curves.h and train/report/attention_map.h): a standalone
// document, well-formed in the XML sense a browser needs.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tapegrad::testing {

/// Number of non-overlapping occurrences of `what` in `text`.
inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// Empty when `svg` is well-formed in the XML sense we rely on (every tag closed in order, no raw '&'
/// outside an entity, no '<' inside text), else what is wrong.
inline std::string xml_problem(const std::string& svg) {
  std::vector<std::string> open;
  for (size_t i = 0; i < svg.size(); ++i) {
    if (svg[i] == '&') {
      const size_t semi = svg.find(';', i);
      const std::string entity = semi == std::string::npos ? "" : svg.substr(i, semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" && entity != "&apos;")
        return "raw & at " + std::to_string(i);
      continue;
    }
    if (svg[i] != '<') continue;
    const size_t end = svg.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = svg.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return "'<' inside tag at " + std::to_string(i);
    if (tag.starts_with('/')) {
      if (open.empty() || open.back() != tag.substr(1)) return "unbalanced </" + tag.substr(1) + ">";
      open.pop_back();
    } else if (!tag.ends_with('/')) {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = end;
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

/// The checks every picture passes: a standalone <svg> document, well-formed, fully written.
inline void check_svg_document(const std::string& svg) {
  CHECK(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(svg.ends_with("</svg>\n"));
  CHECK(xml_problem(svg) == "");
  CHECK(count(svg, "<g ") + count(svg, "<g>") == count(svg, "</g>"));
}

}  // namespace tapegrad::testing
