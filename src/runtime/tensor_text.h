// How tensors are named in messages, metadata and reports, one table for the whole project.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace hpctrain {

// "[64,32,3,3]" ("[]" for a 0-d tensor).
std::string shape_string(c10::IntArrayRef sizes);
// The project's dtype names: float32 float64 float16 bfloat16 int32 int64 uint8 bool (as
// numpy/safetensors spell them); any other dtype by c10's name.
std::string dtype_name(c10::ScalarType s);

// `s` with every byte that is not printable ASCII or part of valid UTF-8 written as \xNN:
// error lines quote names and strings read from files that may be damaged.
std::string printable(const std::string& s);

}  // namespace hpctrain
