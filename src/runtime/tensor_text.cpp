#include "runtime/tensor_text.h"

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

}  // namespace hpctrain
