// Shape and dtype names for messages and metadata, and printable() for names read from
// files that may be damaged.
#include "runtime/tensor_text.h"

#include <cstdio>

namespace hpctrain {

std::string shape_string(c10::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
  return s + "]";
}

std::string dtype_name(c10::ScalarType s) {
  switch (s) {
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kInt: return "int32";
    case c10::kLong: return "int64";
    case c10::kByte: return "uint8";
    case c10::kBool: return "bool";
    default: return c10::toString(s);
  }
}

std::string printable(const std::string& s) {
  std::string out;
  auto cont = [&](size_t i) { return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n == 1 ? (c >= 0x20 && c < 0x7f) : n > 1 && c >= 0xC2 && c <= 0xF4;
    for (size_t k = 1; ok && k < n; ++k) ok = cont(i + k);
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      char buf[5];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
    }
  }
  return out;
}

}  // namespace hpctrain
