// write_token_ids_h5: one HDF5 file with the ids (uint16 or int32), the tokenizer's model bytes
// and the attributes; read_tokenizer_model reads those bytes back.
#include "dataset/prep/token_writer.h"

#include "dataset/tokenizer.h"
#include "io/h5_util.h"
#include "runtime/check.h"

namespace hpctrain {

void write_token_ids_h5(const std::string& path, const std::vector<int64_t>& ids, const Tokenizer& tokenizer,
                        int64_t text_bytes, const std::string& source) {
  auto g = h5::lock();
  h5::silence_errors();
  h5::Handle f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!f.valid()) throw Error("cannot create HDF5 file " + path);
  auto fail = [&](const char* what) { throw Error("writing " + path + ": " + what + " failed"); };
  auto write = [&](const char* name, hid_t file_type, hid_t mem_type, size_t n, const void* data) {
    hsize_t dim = n;
    h5::Handle sp(H5Screate_simple(1, &dim, nullptr));
    h5::Handle ds(H5Dcreate2(f.get(), name, file_type, sp.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    if (!ds.valid()) fail(name);
    if (n && H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) fail(name);
  };
  if (tokenizer.vocab_size() <= 65536) {
    std::vector<uint16_t> v(ids.begin(), ids.end());
    write("tokens", H5T_STD_U16LE, H5T_NATIVE_UINT16, v.size(), v.data());
  } else {
    std::vector<int32_t> v(ids.begin(), ids.end());
    write("tokens", H5T_STD_I32LE, H5T_NATIVE_INT32, v.size(), v.data());
  }
  if (!tokenizer.model().empty())
    write("tokenizer_model", H5T_STD_U8LE, H5T_NATIVE_UINT8, tokenizer.model().size(), tokenizer.model().data());
  h5::write_attr_int64(f.get(), "vocab_size", tokenizer.vocab_size());
  h5::write_attr_string(f.get(), "tokenizer", tokenizer.name());
  h5::write_attr_int64(f.get(), "text_bytes", text_bytes);
  h5::write_attr_string(f.get(), "source", source);
  if (H5Fflush(f.get(), H5F_SCOPE_GLOBAL) < 0) fail("flushing");
}

std::string read_tokenizer_model(const std::string& path) {
  auto g = h5::lock();
  h5::silence_errors();
  h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!f.valid() || H5Lexists(f.get(), "tokenizer_model", H5P_DEFAULT) <= 0) return "";
  h5::Handle ds(H5Dopen2(f.get(), "tokenizer_model", H5P_DEFAULT));
  h5::Handle sp(H5Dget_space(ds.get()));
  if (!ds.valid() || H5Sget_simple_extent_ndims(sp.get()) != 1)
    throw Error(path + ": 'tokenizer_model' is not a 1-D byte dataset");
  hsize_t n = 0;
  H5Sget_simple_extent_dims(sp.get(), &n, nullptr);
  std::string bytes(size_t(n), '\0');
  if (n && H5Dread(ds.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0)
    throw Error(path + ": reading 'tokenizer_model' failed (corrupt or truncated file)");
  return bytes;
}

}  // namespace hpctrain
