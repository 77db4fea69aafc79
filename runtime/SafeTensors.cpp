//===- SafeTensors.cpp - read and write .safetensors files ----------------===//

#include "runtime/SafeTensors.h"

#include "core/FileIO.h"
#include "core/Numerics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace v4a::st {

static const std::pair<const char *, DType> kDTypes[] = {
    {"F32", DType::F32},         {"BF16", DType::BF16},
    {"F16", DType::F16},         {"F8_E4M3", DType::F8_E4M3},
    {"F8_E8M0", DType::F8_E8M0}, {"I32", DType::I32},
    {"I64", DType::I64},         {"U8", DType::U8},
    {"BOOL", DType::BOOL}};

const char *dtypeName(DType dtype) {
  for (auto [name, value] : kDTypes)
    if (value == dtype)
      return name;
  return "?";
}

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I64:
    return 8;
  default:
    return 1;
  }
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

static float halfToFloat(uint16_t h) {
  int sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float value;
  if (exponent == 0)
    value = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31)
    value = mantissa ? NAN : INFINITY;
  else
    value = std::ldexp(1.0f + mantissa / 1024.0f, exponent - 15);
  return sign ? -value : value;
}

std::optional<std::vector<float>> Tensor::toF32() const {
  for (int64_t d : shape)
    if (d < 0)
      return std::nullopt;
  if (static_cast<int64_t>(data.size()) != numel() * dtypeSize(dtype))
    return std::nullopt;
  std::vector<float> out(numel());
  for (int64_t i = 0; i < numel(); ++i) {
    const uint8_t *p = data.data() + i * dtypeSize(dtype);
    switch (dtype) {
    case DType::F32:
      std::memcpy(&out[i], p, 4);
      break;
    case DType::BF16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      out[i] = num::fromBF16Bits(bits);
      break;
    }
    case DType::F16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      out[i] = halfToFloat(bits);
      break;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      out[i] = static_cast<float>(v);
      break;
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      out[i] = static_cast<float>(v);
      break;
    }
    default:
      return std::nullopt;
    }
  }
  return out;
}

Tensor fromF32(const std::vector<int64_t> &shape,
               const std::vector<float> &values, DType dtype) {
  Tensor t;
  // Floats are written as BF16 or F32; any other request writes F32.
  if (dtype != DType::BF16)
    dtype = DType::F32;
  t.dtype = dtype;
  t.shape = shape;
  t.data.resize(values.size() * dtypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::BF16) {
      uint16_t bits = num::toBF16Bits(values[i]);
      std::memcpy(t.data.data() + 2 * i, &bits, 2);
    } else {
      std::memcpy(t.data.data() + 4 * i, &values[i], 4);
    }
  }
  return t;
}

//===----------------------------------------------------------------------===//
// A JSON reader for the header: objects, arrays, strings, integers.
//===----------------------------------------------------------------------===//

namespace {

struct Json {
  enum Kind { Null, Number, String, Array, Object, Other } kind = Null;
  bool integral = false;
  int64_t integer = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
  const Json *get(const std::string &key) const {
    for (const auto &[name, value] : members)
      if (name == key)
        return &value;
    return nullptr;
  }
};

class Parser {
public:
  Parser(const char *begin, const char *end) : p(begin), end(end) {}

  bool parse(Json &out, std::string &error) {
    if (!value(out, 0) || (skip(), p != end)) {
      error = "malformed JSON header near byte " + std::to_string(offset());
      return false;
    }
    return true;
  }

private:
  size_t offset() const { return static_cast<size_t>(p - start); }
  void skip() {
    while (p != end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
      ++p;
  }
  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (static_cast<size_t>(end - p) < n || std::strncmp(p, word, n) != 0)
      return false;
    p += n;
    return true;
  }
  bool string(std::string &out) {
    if (p == end || *p != '"')
      return false;
    ++p;
    while (p != end && *p != '"') {
      if (*p == '\\') {
        if (++p == end)
          return false;
        char c = *p;
        if (c == 'u') {
          if (end - p < 5)
            return false;
          p += 4; // keep the escape out of names; not needed here
          out += '?';
        } else {
          out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        ++p;
        continue;
      }
      out += *p++;
    }
    if (p == end)
      return false;
    ++p;
    return true;
  }
  bool number(Json &out) {
    const char *begin = p;
    while (p != end &&
           (std::isdigit(static_cast<unsigned char>(*p)) || *p == '.' ||
            *p == 'e' || *p == 'E' || *p == '+' || *p == '-'))
      ++p;
    if (p == begin)
      return false;
    out.kind = Json::Number;
    // Integers: an optional '-' and up to 18 digits; anything else is a
    // number that no header field accepts.
    std::string token(begin, p);
    size_t digits = token[0] == '-' ? 1 : 0;
    out.integral =
        token.size() > digits && token.size() - digits <= 18 &&
        token.find_first_not_of("0123456789", digits) == std::string::npos;
    if (out.integral)
      out.integer = std::strtoll(token.c_str(), nullptr, 10);
    return true;
  }
  bool value(Json &out, int depth) {
    skip();
    // Each value costs about a hundred bytes parsed: bound their number so
    // that a header of a million tiny values cannot take gigabytes.
    if (p == end || depth > 16 || ++values > kMaxValues)
      return false;
    if (*p == '{') {
      out.kind = Json::Object;
      ++p;
      skip();
      if (p != end && *p == '}')
        return ++p, true;
      while (true) {
        std::string key;
        Json member;
        skip();
        if (!string(key) || (skip(), p == end || *p++ != ':') ||
            !value(member, depth + 1))
          return false;
        out.members.emplace_back(std::move(key), std::move(member));
        skip();
        if (p != end && *p == ',') {
          ++p;
          continue;
        }
        return p != end && *p++ == '}';
      }
    }
    if (*p == '[') {
      out.kind = Json::Array;
      ++p;
      skip();
      if (p != end && *p == ']')
        return ++p, true;
      while (true) {
        Json item;
        if (!value(item, depth + 1))
          return false;
        out.items.push_back(std::move(item));
        skip();
        if (p != end && *p == ',') {
          ++p;
          continue;
        }
        return p != end && *p++ == ']';
      }
    }
    if (*p == '"') {
      out.kind = Json::String;
      return string(out.text);
    }
    if (literal("null") || literal("true") || literal("false")) {
      out.kind = Json::Other;
      return true;
    }
    return number(out);
  }

  static constexpr size_t kMaxValues = size_t(4) << 20;
  const char *p, *end;
  const char *start = p;
  size_t values = 0;
};

} // namespace

static bool fail(std::string &error, const std::string &message) {
  error = message;
  return false;
}

/// No tensor of a checkpoint or input has more dimensions.
constexpr size_t kMaxRank = 8;

static bool readEntry(const std::string &name, const Json &entry,
                      uint64_t dataSize, Tensor &tensor,
                      std::pair<uint64_t, uint64_t> &range,
                      std::string &error) {
  const Json *dtype = entry.get("dtype");
  const Json *shape = entry.get("shape");
  const Json *offsets = entry.get("data_offsets");
  if (entry.kind != Json::Object || !dtype || dtype->kind != Json::String ||
      !shape || shape->kind != Json::Array || !offsets ||
      offsets->kind != Json::Array || offsets->items.size() != 2)
    return fail(error, name + ": header entry needs dtype, shape and "
                              "data_offsets [begin, end]");
  bool known = false;
  for (auto [label, value] : kDTypes)
    if (dtype->text == label) {
      tensor.dtype = value;
      known = true;
    }
  if (!known)
    return fail(error, name + ": unsupported dtype '" + dtype->text + "'");
  if (shape->items.size() > kMaxRank)
    return fail(error,
                name + ": shape has " + std::to_string(shape->items.size()) +
                    " dimensions, more than " + std::to_string(kMaxRank));
  uint64_t count = 1;
  for (const Json &dim : shape->items) {
    if (dim.kind != Json::Number || !dim.integral || dim.integer < 0 ||
        dim.integer > (int64_t(1) << 40))
      return fail(error,
                  name + ": shape entries must be integers in [0, 2^40]");
    tensor.shape.push_back(dim.integer);
    if (dim.integer != 0 && count > (uint64_t(1) << 50) / dim.integer)
      return fail(error, name + ": shape is too large");
    count *= dim.integer;
  }
  for (const Json &o : offsets->items)
    if (o.kind != Json::Number || !o.integral || o.integer < 0)
      return fail(error, name + ": data_offsets must be non-negative integers");
  range = {static_cast<uint64_t>(offsets->items[0].integer),
           static_cast<uint64_t>(offsets->items[1].integer)};
  uint64_t bytes = count * dtypeSize(tensor.dtype);
  if (range.second < range.first || range.second - range.first != bytes)
    return fail(error, name + ": data_offsets span " +
                           std::to_string(range.second - range.first) +
                           " bytes, the shape needs " + std::to_string(bytes));
  if (range.second > dataSize)
    return fail(error, name + ": data ends at byte " +
                           std::to_string(range.second) + " but the file has " +
                           std::to_string(dataSize) +
                           " data bytes (truncated file?)");
  return true;
}

/// Headers beyond this are not safetensors files (real ones are kilobytes).
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

/// The header length that a file of `size` bytes starts with (8 bytes,
/// little endian), when it fits the file and the limit.
static std::optional<uint64_t> headerLength(const uint8_t *prefix,
                                            uint64_t size, std::string &error) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | prefix[i];
  if (length > size - 8 || length > kMaxHeaderBytes) {
    error = "header length " + std::to_string(length) + " exceeds the file (" +
            std::to_string(size) +
            " bytes): truncated or not a safetensors file";
    return std::nullopt;
  }
  return length;
}

namespace {
/// One tensor of a checked header: where its bytes lie in the data.
struct Entry {
  std::string name;
  Tensor tensor; // dtype and shape; no data yet
  std::pair<uint64_t, uint64_t> range;
};
} // namespace

/// Checks a header's JSON against `dataSize` data bytes: every entry, a
/// string-valued __metadata__ object, no repeated names and no two tensors
/// sharing bytes.
static bool parseHeader(const char *text, uint64_t headerSize,
                        uint64_t dataSize, std::vector<Entry> &entries,
                        std::string &error) {
  Json header;
  if (!Parser(text, text + headerSize).parse(header, error))
    return false;
  if (header.kind != Json::Object)
    return fail(error, "the header is not a JSON object");
  for (const auto &[name, value] : header.members) {
    if (name == "__metadata__") {
      bool strings = value.kind == Json::Object;
      for (const auto &member : value.members)
        strings = strings && member.second.kind == Json::String;
      if (!strings)
        return fail(error, "__metadata__ must be an object of strings");
      continue;
    }
    Entry entry{name, {}, {}};
    if (!readEntry(name, value, dataSize, entry.tensor, entry.range, error))
      return false;
    entries.push_back(std::move(entry));
  }
  std::vector<const Entry *> byOffset;
  for (const Entry &entry : entries)
    byOffset.push_back(&entry);
  std::sort(
      byOffset.begin(), byOffset.end(), [](const Entry *a, const Entry *b) {
        return a->range != b->range ? a->range < b->range : a->name < b->name;
      });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const Entry &before = *byOffset[i - 1], &after = *byOffset[i];
    if (after.range.first < before.range.second)
      return fail(error, after.name + ": data_offsets [" +
                             std::to_string(after.range.first) + ", " +
                             std::to_string(after.range.second) + ") overlap " +
                             before.name + " [" +
                             std::to_string(before.range.first) + ", " +
                             std::to_string(before.range.second) + ")");
  }
  std::set<std::string> names;
  for (const Entry &entry : entries)
    if (!names.insert(entry.name).second)
      return fail(error, entry.name + ": appears twice in the header");
  return true;
}

/// Where the data of a header's tensors ends.
static bool headerDataEnd(const char *text, uint64_t headerSize,
                          uint64_t &dataEnd, std::string &error) {
  std::vector<Entry> entries;
  if (!parseHeader(text, headerSize, UINT64_MAX, entries, error))
    return false;
  dataEnd = 0;
  for (const Entry &entry : entries)
    dataEnd = std::max(dataEnd, entry.range.second);
  return true;
}

std::optional<File> parse(const uint8_t *bytes, size_t size, std::string &error,
                          const TensorFilter &only) {
  if (size < 8) {
    error = "file too short for a safetensors header (" + std::to_string(size) +
            " bytes)";
    return std::nullopt;
  }
  std::optional<uint64_t> length = headerLength(bytes, size, error);
  if (!length)
    return std::nullopt;
  uint64_t headerSize = *length;
  std::vector<Entry> entries;
  if (!parseHeader(reinterpret_cast<const char *>(bytes + 8), headerSize,
                   size - 8 - headerSize, entries, error))
    return std::nullopt;
  const uint8_t *data = bytes + 8 + headerSize;
  File file;
  for (Entry &entry : entries) {
    if (only && !only(entry.name))
      continue;
    entry.tensor.data.assign(data + entry.range.first,
                             data + entry.range.second);
    file.emplace(entry.name, std::move(entry.tensor));
  }
  return file;
}

/// The bytes of a safetensors file that is not a regular file (a FIFO or
/// a device): the header says how many data bytes follow, and no more are
/// read, so `/dev/zero` is a malformed header, not an endless read.
static std::optional<std::string> readStream(io::InputFile &in,
                                             const std::string &path,
                                             uint64_t limit,
                                             std::string &error) {
  std::string bytes;
  if (!in.read(bytes, 8, error))
    return std::nullopt;
  if (bytes.size() < 8) {
    error = path + ": file too short for a safetensors header";
    return std::nullopt;
  }
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = (headerSize << 8) | static_cast<uint8_t>(bytes[i]);
  if (headerSize > kMaxHeaderBytes) {
    error = path + ": header length " + std::to_string(headerSize) +
            " exceeds the limit of " + std::to_string(kMaxHeaderBytes);
    return std::nullopt;
  }
  if (!in.read(bytes, headerSize, error))
    return std::nullopt;
  // Parse the header alone with unbounded data to learn where data ends.
  uint64_t dataEnd = 0;
  if (!headerDataEnd(bytes.data() + 8, bytes.size() - 8, dataEnd, error)) {
    error = path + ": " + error;
    return std::nullopt;
  }
  if (dataEnd > limit) {
    error = path + ": the header needs " + io::formatBytes(dataEnd) +
            " of data, more than the memory limit of " + io::formatBytes(limit);
    return std::nullopt;
  }
  if (!in.read(bytes, dataEnd, error))
    return std::nullopt;
  return bytes;
}

/// A regular file: the header first, then only the kept tensors' bytes, each
/// read into its own buffer after their total is checked against memory.
static std::optional<File> readRegular(io::InputFile &in,
                                       const std::string &path,
                                       const TensorFilter &only,
                                       std::string &error) {
  uint64_t size = in.size();
  uint8_t prefix[8];
  if (size < 8) {
    error = "file too short for a safetensors header (" + std::to_string(size) +
            " bytes)";
    return std::nullopt;
  }
  if (!in.readAt(prefix, 0, 8, error))
    return std::nullopt;
  std::optional<uint64_t> length = headerLength(prefix, size, error);
  if (!length)
    return std::nullopt;
  uint64_t headerSize = *length;
  std::string header(headerSize, '\0');
  if (!in.readAt(reinterpret_cast<uint8_t *>(header.data()), 8, headerSize,
                 error))
    return std::nullopt;
  std::vector<Entry> entries;
  if (!parseHeader(header.data(), headerSize, size - 8 - headerSize, entries,
                   error))
    return std::nullopt;
  double kept = 0.0;
  for (const Entry &entry : entries)
    if (!only || only(entry.name))
      kept += static_cast<double>(entry.range.second - entry.range.first);
  if (!io::fitsInMemory(kept, "its tensors", error))
    return std::nullopt;
  File file;
  for (Entry &entry : entries) {
    if (only && !only(entry.name))
      continue;
    uint64_t bytes = entry.range.second - entry.range.first;
    entry.tensor.data.resize(bytes);
    if (!in.readAt(entry.tensor.data.data(), 8 + headerSize + entry.range.first,
                   bytes, error))
      return std::nullopt;
    file.emplace(entry.name, std::move(entry.tensor));
  }
  return file;
}

std::optional<File> read(const std::string &path, std::string &error,
                         const TensorFilter &only) {
  std::optional<io::InputFile> in =
      io::InputFile::open(path, "safetensors", error);
  if (!in)
    return std::nullopt;
  std::optional<File> file;
  if (in->isRegular()) {
    file = readRegular(*in, path, only, error);
  } else {
    // A FIFO or device: read what the header says, then parse in memory.
    uint64_t limit = io::physicalMemory().value_or(uint64_t(1) << 40);
    std::optional<std::string> bytes = readStream(*in, path, limit, error);
    if (!bytes)
      return std::nullopt;
    file = parse(reinterpret_cast<const uint8_t *>(bytes->data()),
                 bytes->size(), error, only);
  }
  if (!file && error.rfind(path + ":", 0) != 0)
    error = path + ": " + error;
  return file;
}

static void appendEscaped(std::string &out, const std::string &text) {
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
}

std::vector<uint8_t> serialize(const File &file) {
  std::string header = "{";
  uint64_t offset = 0;
  bool first = true;
  for (const auto &[name, tensor] : file) {
    header += first ? "\"" : ",\"";
    first = false;
    appendEscaped(header, name);
    header += "\":{\"dtype\":\"" + std::string(dtypeName(tensor.dtype)) +
              "\",\"shape\":[";
    for (size_t i = 0; i < tensor.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(tensor.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + tensor.data.size()) + "]}";
    offset += tensor.data.size();
  }
  header += "}";
  while (header.size() % 8 != 0)
    header += ' ';
  std::vector<uint8_t> bytes(8);
  uint64_t size = header.size();
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<uint8_t>(size >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  for (const auto &[name, tensor] : file)
    bytes.insert(bytes.end(), tensor.data.begin(), tensor.data.end());
  return bytes;
}

bool write(const std::string &path, const File &file, std::string &error) {
  std::vector<uint8_t> bytes = serialize(file);
  return io::writeFile(
      path,
      std::string_view(reinterpret_cast<const char *>(bytes.data()),
                       bytes.size()),
      error);
}

} // namespace v4a::st
