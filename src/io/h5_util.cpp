// The HDF5 helpers: one recursive mutex (helpers that lock call each other), Handle closing by
// H5Iget_type, error silencing once per thread, and attributes (a string attribute is read
// whether fixed- or variable-length).
#include "io/h5_util.h"

#include "runtime/check.h"

namespace hpctrain::h5 {

std::unique_lock<std::recursive_mutex> lock() {
  // Recursive: helpers that lock call each other while their caller holds the lock.
  static std::recursive_mutex m;
  return std::unique_lock<std::recursive_mutex>(m);
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::reset() {
  if (id_ < 0) return;
  auto g = lock();
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    default: break;
  }
  id_ = H5I_INVALID_HID;
}

void silence_errors() {
  thread_local bool done = false;
  if (done) return;
  auto g = lock();
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  done = true;
}

bool library_threadsafe() {
  hbool_t ts = 0;
  return H5is_library_threadsafe(&ts) >= 0 && ts;
}

std::string library_version() {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  return std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel);
}

std::string type_name(hid_t t) {
  auto g = lock();
  const size_t bytes = H5Tget_size(t);
  switch (H5Tget_class(t)) {
    case H5T_INTEGER: return std::string(H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(8 * bytes);
    case H5T_FLOAT: return "float" + std::to_string(8 * bytes);
    case H5T_STRING: return "string";
    case H5T_ENUM: return "enum";
    case H5T_COMPOUND: return "compound";
    default: return "non-numeric type";
  }
}

namespace {
void check(herr_t rc, const std::string& what) {
  if (rc < 0) throw Error("HDF5: " + what + " failed");
}
void write_attr(hid_t obj, const std::string& name, hid_t type, hid_t space, const void* data) {
  auto g = lock();
  if (H5Aexists(obj, name.c_str()) > 0) check(H5Adelete(obj, name.c_str()), "deleting attribute " + name);
  Handle a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!a.valid()) throw Error("HDF5: creating attribute " + name + " failed");
  check(H5Awrite(a.get(), type, data), "writing attribute " + name);
}
Handle simple_space(hsize_t n) { return Handle(H5Screate_simple(1, &n, nullptr)); }
// Opens attribute `name` of a 1-D (or scalar) shape and returns its element count, or -1.
Handle open_attr(hid_t obj, const std::string& name, hssize_t* count) {
  if (H5Aexists(obj, name.c_str()) <= 0) return Handle();
  Handle a(H5Aopen(obj, name.c_str(), H5P_DEFAULT));
  Handle s(H5Aget_space(a.get()));
  *count = H5Sget_simple_extent_npoints(s.get());
  return a;
}
}  // namespace

void write_attr_string(hid_t obj, const std::string& name, const std::string& value) {
  auto g = lock();
  Handle t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), value.empty() ? 1 : value.size());
  H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
  Handle s(H5Screate(H5S_SCALAR));
  write_attr(obj, name, t.get(), s.get(), value.c_str());
}

void write_attr_strings(hid_t obj, const std::string& name, const std::vector<std::string>& v) {
  auto g = lock();
  Handle t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  std::vector<const char*> ptrs;
  for (auto& s : v) ptrs.push_back(s.c_str());
  Handle s = simple_space(v.size());
  write_attr(obj, name, t.get(), s.get(), ptrs.data());
}

void write_attr_floats(hid_t obj, const std::string& name, const std::vector<float>& v) {
  auto g = lock();
  Handle s = simple_space(v.size());
  write_attr(obj, name, H5T_NATIVE_FLOAT, s.get(), v.data());
}

void write_attr_int64(hid_t obj, const std::string& name, int64_t v) {
  auto g = lock();
  Handle s(H5Screate(H5S_SCALAR));
  write_attr(obj, name, H5T_NATIVE_INT64, s.get(), &v);
}

bool read_attr_string(hid_t obj, const std::string& name, std::string* out) {
  auto g = lock();
  hssize_t n = 0;
  Handle a = open_attr(obj, name, &n);
  if (!a.valid() || n != 1) return false;
  Handle type(H5Aget_type(a.get()));
  if (H5Tget_class(type.get()) != H5T_STRING) return false;
  // The file's character set (h5py writes UTF-8): HDF5 converts no string between ASCII and UTF-8.
  const H5T_cset_t cset = H5Tget_cset(type.get());
  if (H5Tis_variable_str(type.get()) > 0) {
    Handle mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), cset);
    char* p = nullptr;
    if (H5Aread(a.get(), mem.get(), &p) < 0 || !p) return false;
    *out = p;
    H5free_memory(p);
    return true;
  }
  size_t size = H5Tget_size(type.get());
  std::string s(size, '\0');
  Handle mem(H5Tcopy(H5T_C_S1));
  H5Tset_size(mem.get(), size);
  H5Tset_strpad(mem.get(), H5T_STR_NULLPAD);
  H5Tset_cset(mem.get(), cset);
  if (size > 0 && H5Aread(a.get(), mem.get(), s.data()) < 0) return false;
  s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
  *out = std::move(s);
  return true;
}

bool read_attr_floats(hid_t obj, const std::string& name, std::vector<float>* out) {
  auto g = lock();
  hssize_t n = 0;
  Handle a = open_attr(obj, name, &n);
  if (!a.valid() || n < 0) return false;
  out->assign(static_cast<size_t>(n), 0.f);
  return H5Aread(a.get(), H5T_NATIVE_FLOAT, out->data()) >= 0;
}

bool read_attr_int64(hid_t obj, const std::string& name, int64_t* out) {
  auto g = lock();
  hssize_t n = 0;
  Handle a = open_attr(obj, name, &n);
  if (!a.valid() || n != 1) return false;
  return H5Aread(a.get(), H5T_NATIVE_INT64, out) >= 0;
}

}  // namespace hpctrain::h5
