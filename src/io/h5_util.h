// The one HDF5 layer of hpctrain, shared by src/dataset (reader, writers) and src/ckpt (shards,
// merged files): handle, lock, error silencing, type names, attributes.
//
// Why a process-wide mutex around every HDF5 call: Debian's HDF5 1.10 serial library is built
// thread-safe (one global lock inside the library), but other builds users may link against
// (--enable-threadsafe off, the default upstream) are not, and the library's error stack is
// per-thread state we read after a failed call. Taking our own lock makes every build safe, costs
// nothing measurable (HDF5 serializes internally anyway) and keeps "open, select, read, check
// error" sequences atomic. Hold h5_lock() for any sequence of H5* calls.
// The io/ stage among the others, its threads and locks: docs/architecture.md.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace hpctrain::h5 {

// The lock every H5* call in hpctrain is made under.
std::unique_lock<std::recursive_mutex> lock();

// Owns one hid_t and closes it with the matching H5?close. Move-only.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();
  // Gives up ownership (for a close whose result matters, e.g. H5Fclose).
  hid_t release() {
    hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Turns off HDF5's automatic error printing to stderr (we report one line ourselves). The
// setting is per thread in thread-safe builds, so call it on every thread that makes H5* calls
// (cheap: once per thread does the work).
void silence_errors();

// Whether the linked HDF5 library was built thread-safe (--enable-threadsafe). hpctrain is
// safe either way (h5::lock()); `hpctrain doctor` reports it.
bool library_threadsafe();

// "1.10.8": the linked library's version.
std::string library_version();

// A readable name of an HDF5 datatype for error messages: "uint8", "int16", "float32",
// "string", "enum", "compound", ...
std::string type_name(hid_t type);

// Attribute helpers (object = file or dataset). Readers return false when absent.
void write_attr_string(hid_t obj, const std::string& name, const std::string& value);
void write_attr_strings(hid_t obj, const std::string& name, const std::vector<std::string>& v);
void write_attr_floats(hid_t obj, const std::string& name, const std::vector<float>& v);
void write_attr_int64(hid_t obj, const std::string& name, int64_t v);
// A fixed-length or variable-length string attribute; false when absent or not a string.
bool read_attr_string(hid_t obj, const std::string& name, std::string* out);
bool read_attr_floats(hid_t obj, const std::string& name, std::vector<float>* out);
bool read_attr_int64(hid_t obj, const std::string& name, int64_t* out);

}  // namespace hpctrain::h5
