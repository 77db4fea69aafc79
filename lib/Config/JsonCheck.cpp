//===- JsonCheck.cpp - structural limits of JSON input --------------------===//

#include "lib/Config/JsonCheck.h"

#include <set>
#include <vector>

namespace v4a {

namespace {

/// One open array or object; objects remember their keys.
struct Level {
  bool object;
  std::set<std::string> keys;
};

/// Reads the string starting at `text[i]` (a quote), escapes kept as written:
/// two spellings of one key are not caught, which the parser then resolves.
std::string readString(std::string_view text, size_t &i) {
  std::string value;
  for (++i; i < text.size() && text[i] != '"'; ++i) {
    if (text[i] == '\\' && i + 1 < text.size())
      value += text[i++];
    value += text[i];
  }
  ++i;
  return value;
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

} // namespace

bool checkJsonStructure(std::string_view text, std::string &error,
                        int maxDepth) {
  std::vector<Level> open;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == '[' || c == '{') {
      if (static_cast<int>(open.size()) == maxDepth) {
        error = "JSON nested deeper than " + std::to_string(maxDepth) +
                " levels at byte " + std::to_string(i);
        return false;
      }
      open.push_back({c == '{', {}});
      ++i;
      continue;
    }
    if (c == ']' || c == '}') {
      if (!open.empty())
        open.pop_back();
      ++i;
      continue;
    }
    if (c != '"') {
      ++i;
      continue;
    }
    size_t begin = i;
    std::string value = readString(text, i);
    size_t next = i;
    while (next < text.size() && isSpace(text[next]))
      ++next;
    bool isKey = next < text.size() && text[next] == ':' && !open.empty() &&
                 open.back().object;
    if (isKey && !open.back().keys.insert(value).second) {
      error =
          "duplicate key \"" + value + "\" at byte " + std::to_string(begin);
      return false;
    }
  }
  return true;
}

} // namespace v4a
