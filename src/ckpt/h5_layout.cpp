// build_h5_layout: HDF5 lays a file out in a scratch file (in memory when compressed), holes
// where the tensors' bytes go; only the bytes between them are kept.
#include "ckpt/h5_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "io/h5_tensor.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {

namespace {

// A scratch file in `dir` for HDF5 to build a layout in, unlinked as soon as HDF5 has opened it
// by name (a memfd would do, but HDF5 resolves the name it opens with realpath, and
// /proc/self/fd/N of a memfd resolves to nothing).
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& dir) : name_(dir + "/.hpctrain-h5-layout-XXXXXX") {
    fd_ = ::mkostemp(name_.data(), O_CLOEXEC);
    if (fd_ < 0) throw Error("cannot create a scratch file in " + dir + ": " + std::strerror(errno));
  }
  ~ScratchFile() {
    unlink_name();
    ::close(fd_);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  const std::string& name() const { return name_; }
  int fd() const { return fd_; }
  void unlink_name() {
    if (!name_.empty()) ::unlink(name_.c_str());
    name_.clear();
  }

 private:
  std::string name_;
  int fd_ = -1;
};

// Where a built layout's bytes are read back from: a scratch file (uncompressed) or HDF5's
// in-memory image (compressed).
struct Built {
  std::unique_ptr<ScratchFile> scratch;
  std::vector<unsigned char> image;
  void read(size_t from, size_t n, unsigned char* dst) const {
    if (!scratch) {
      std::memcpy(dst, image.data() + from, n);
      return;
    }
    for (size_t done = 0; done < n;) {
      ssize_t k = ::pread(scratch->fd(), dst + done, n - done, static_cast<off_t>(from + done));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0)
        throw Error(std::string("read of the scratch file failed: ") + (k < 0 ? std::strerror(errno) : "short file"));
      done += static_cast<size_t>(k);
    }
  }
};

// The datasets and attributes of `in` in the open HDF5 file `file`.
void fill_file(hid_t file, const H5LayoutInput& in, H5Layout& l) {
  const auto& ds = in.datasets;
  l.offsets.assign(ds.size(), -1);
  for (size_t i = 0; i < ds.size(); ++i) {
    l.offsets[i] = in.compress_data ? h5::create_dataset(file, ds[i].name, (*in.compress_data)[i].second, true, true)
                                    : h5::create_dataset(file, ds[i].name, ds[i].dtype, ds[i].shape);
    if (i == 0 && in.after_first_dataset) in.after_first_dataset();
  }
  for (const auto& [k, v] : in.root_attrs) h5::write_attr_string(file, k, v);
}

// Uncompressed: HDF5 builds the file in a scratch file in `dir` (unlinked at once). HDF5 must not
// meet a full file system there: a failed H5Fclose leaves the file open inside HDF5, which then
// crashes at exit. So the directory must have room for the metadata, with a wide margin.
Built build_in(const std::string& dir, const H5LayoutInput& in, H5Layout& l) {
  const size_t need = (size_t{1} << 20) + (size_t{16} << 10) * in.datasets.size();
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) != 0) throw Error("cannot stat " + dir + ": " + std::strerror(errno));
  const size_t room = static_cast<size_t>(fs.f_bavail) * fs.f_frsize;
  if (room < need)
    throw Error(dir + " has " + std::to_string(room >> 10) + " KiB free, fewer than the " + std::to_string(need >> 10) +
                " KiB a layout may take");
  auto g = h5::lock();  // before the scratch name exists: a kill while waiting leaves nothing
  Built b;
  b.scratch = std::make_unique<ScratchFile>(dir);
  h5::silence_errors();
  h5::Handle file(H5Fcreate(b.scratch->name().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file.valid()) throw Error("HDF5 cannot create its scratch file " + b.scratch->name());
  b.scratch->unlink_name();
  fill_file(file.get(), in, l);
  if (H5Fclose(file.release()) < 0) throw Error("HDF5 could not close its scratch file in " + dir);
  struct stat sb;
  if (::fstat(b.scratch->fd(), &sb) != 0)
    throw Error("stat of the scratch file failed: " + std::string(std::strerror(errno)));
  if (sb.st_size <= 0) throw Error("HDF5 left its scratch file in " + dir + " empty");
  l.size = static_cast<size_t>(sb.st_size);
  return b;
}

// Compressed: every byte is HDF5's (the deflated data too), so it is built in memory by HDF5's
// core driver (no file system to fill up) and copied out with H5Fget_file_image.
Built build_in_memory(const std::string& path, const H5LayoutInput& in, H5Layout& l) {
  auto g = h5::lock();
  h5::silence_errors();
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (H5Pset_fapl_core(fapl.get(), size_t{1} << 20, 0) < 0) throw Error("cannot set up HDF5's in-memory driver");
  h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  if (!file.valid()) throw Error("cannot create HDF5 file " + path + " in memory");
  fill_file(file.get(), in, l);
  if (H5Fflush(file.get(), H5F_SCOPE_LOCAL) < 0) throw Error("HDF5 flush failed");
  ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size <= 0) throw Error("HDF5 file image unavailable");
  Built b;
  b.image.resize(static_cast<size_t>(size));
  if (H5Fget_file_image(file.get(), b.image.data(), b.image.size()) != size) throw Error("HDF5 file image unavailable");
  // The open file's superblock says "open for writing"; H5Fget_file_image's copy must be the
  // closed file's bytes. Superblock v0/v1: consistency flags, 4 bytes at 20.
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (b.image.size() < 24 || std::memcmp(b.image.data(), sig, 8) != 0 || b.image[8] > 1)
    throw Error("unexpected HDF5 superblock");
  std::memset(b.image.data() + 20, 0, 4);
  l.size = b.image.size();
  return b;
}

// Builds the file's HDF5 structure, uncompressed in a scratch file through HDF5's default
// (sec2) driver: storage that HDF5 allocates but never writes stays a hole there, so a 256 MiB
// shard's layout costs its metadata pages only (the core driver zero-fills the file's whole
// address range, a page fault per 4 KiB: more than the write itself in a fresh process). Then
// only the bytes between the tensors' storage are read back.
}  // namespace

H5Layout build_h5_layout(const std::string& path, const H5LayoutInput& in) {
  const auto& ds = in.datasets;
  H5Layout l;
  Built built;
  if (in.compress_data) {
    try {
      built = build_in_memory(path, in, l);
    } catch (const Error& e) {
      throw Error("building " + path + ": " + e.what());
    }
  } else {
    // In memory (/dev/shm), else (missing, read-only or nearly full) $TMPDIR or /tmp.
    const char* tmp = std::getenv("TMPDIR");
    std::string tried;
    for (const std::string dir : {std::string("/dev/shm"), std::string(tmp && *tmp ? tmp : "/tmp")}) {
      try {
        l = H5Layout();
        built = build_in(dir, in, l);
        break;
      } catch (const Error& e) {
        tried += (tried.empty() ? "" : "; ") + std::string(e.what());
      }
    }
    if (!built.scratch) throw Error("building " + path + ": " + tried);
  }
  const std::vector<int64_t>& offsets = l.offsets;

  // The file in order: HDF5's bytes between the tensors' storage.
  std::vector<int> order;
  for (size_t i = 0; i < ds.size(); ++i)
    if (offsets[i] >= 0) order.push_back(static_cast<int>(i));
  std::sort(order.begin(), order.end(), [&](int a, int b) { return offsets[a] < offsets[b]; });
  size_t pos = 0;
  auto segment = [&](size_t from, size_t to) {
    l.segments.push_back({from, to - from, l.meta.size()});
    l.meta.resize(l.meta.size() + (to - from));
    built.read(from, to - from, l.meta.data() + l.segments.back().meta_off);
  };
  for (int i : order) {
    size_t off = static_cast<size_t>(offsets[i]), n = ds[i].nbytes();
    if (off < pos || off + n > l.size)
      throw Error("building " + path + ": dataset " + printable(ds[i].name) + " storage out of place");
    if (off > pos) segment(pos, off);
    pos = off + n;
  }
  if (pos < l.size) segment(pos, l.size);
  return l;
}


}  // namespace hpctrain::ckpt
