// write_h5_file: HDF5 lays the file out in a scratch file, holes where the tensors go (in
// memory when compressed); one writev pass splices its bytes with the tensors' own memory,
// hashing in 1 MiB blocks. An uncompressed layout is reused by the next file of that layout.
#include "ckpt/h5_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ckpt/checksum.h"
#include "io/h5_tensor.h"
#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {
namespace {

// One stretch of the output file: image bytes (tensor < 0) or a tensor's own bytes.
struct Piece {
  const unsigned char* data;
  size_t len;
  int tensor;
};

class Fd {
 public:
  Fd(const std::string& path, int flags) : path_(path), fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(what + " " + path_ + " failed: " + std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_;
};

// writev of a batch of iovecs, all of it (short writes continue).
void write_all(const Fd& fd, std::vector<iovec>& iov) {
  size_t i = 0;
  while (i < iov.size()) {
    ssize_t n = ::writev(fd.get(), iov.data() + i, static_cast<int>(std::min<size_t>(iov.size() - i, IOV_MAX)));
    if (n < 0) {
      if (errno == EINTR) continue;
      fd.fail("write");
    }
    for (size_t left = static_cast<size_t>(n); left > 0 && i < iov.size();) {
      size_t take = std::min(left, iov[i].iov_len);
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + take;
      iov[i].iov_len -= take;
      left -= take;
      if (iov[i].iov_len == 0) ++i;
    }
  }
  iov.clear();
}

struct XxhState {
  XXH3_state_t* s = XXH3_createState();
  XxhState() { XXH3_64bits_reset(s); }
  ~XxhState() { XXH3_freeState(s); }
  void reset() { XXH3_64bits_reset(s); }
  void update(const void* p, size_t n) { XXH3_64bits_update(s, p, n); }
  uint64_t digest() const { return XXH3_64bits_digest(s); }
};

// Where a file's bytes come from: its HDF5 metadata (and compressed data), copied out of the
// image, between the uncompressed tensors' storage.
struct Layout {
  size_t size = 0;
  std::vector<int64_t> offsets;  // per tensor, -1: inside `meta` (compressed) or empty
  struct Segment {
    size_t file_off, len, meta_off;
  };
  std::vector<Segment> segments;
  std::vector<unsigned char> meta;
};

// Shards of one model have the same names, dtypes and shapes at every checkpoint, and their
// metadata does not depend on the values (no times are tracked, uncompressed data is not
// HDF5's), so the metadata of the last files is reused byte for byte: the HDF5 work (a third of
// a small checkpoint's write time) is done once per layout.
std::mutex layout_mu;
std::map<std::string, std::shared_ptr<const Layout>> layouts;

std::string layout_key(const H5FileSpec& spec) {
  std::string k;
  for (const auto& [name, t] : *spec.tensors) {
    k += name;
    k += '\0';
    k += std::to_string(static_cast<int>(t.scalar_type()));
    for (int64_t d : t.sizes()) k += ',' + std::to_string(d);
    k += '\n';
  }
  for (const auto& [a, v] : spec.root_attrs) k += a + '\0' + v + '\n';
  return k;
}

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

// The datasets and attributes of `spec` in the open HDF5 file `file`.
void fill_file(hid_t file, const H5FileSpec& spec, WrittenFile& out, Layout& l) {
  const auto& tensors = *spec.tensors;
  l.offsets.assign(tensors.size(), -1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i].second;
    l.offsets[i] = h5::create_dataset(file, tensors[i].first, t, spec.compress, /*write_data=*/spec.compress);
    if (l.offsets[i] < 0) out.tensor_xxh3[i] = checksum(t);
    if (i == 0 && spec.after_first_dataset) spec.after_first_dataset();
  }
  for (const auto& [k, v] : spec.root_attrs) h5::write_attr_string(file, k, v);
}

// Uncompressed: HDF5 builds the file in a scratch file in `dir` (unlinked at once). HDF5 must not
// meet a full file system there: a failed H5Fclose leaves the file open inside HDF5, which then
// crashes at exit. So the directory must have room for the metadata, with a wide margin.
Built build_in(const std::string& dir, const H5FileSpec& spec, WrittenFile& out, Layout& l) {
  const size_t need = (size_t{1} << 20) + (size_t{16} << 10) * spec.tensors->size();
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
  fill_file(file.get(), spec, out, l);
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
Built build_in_memory(const std::string& path, const H5FileSpec& spec, WrittenFile& out, Layout& l) {
  auto g = h5::lock();
  h5::silence_errors();
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (H5Pset_fapl_core(fapl.get(), size_t{1} << 20, 0) < 0) throw Error("cannot set up HDF5's in-memory driver");
  h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  if (!file.valid()) throw Error("cannot create HDF5 file " + path + " in memory");
  fill_file(file.get(), spec, out, l);
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
Layout build_layout(const std::string& path, const H5FileSpec& spec, WrittenFile& out) {
  const auto& tensors = *spec.tensors;
  Layout l;
  Built built;
  if (spec.compress) {
    try {
      built = build_in_memory(path, spec, out, l);
    } catch (const Error& e) {
      throw Error("building " + path + ": " + e.what());
    }
  } else {
    // In memory (/dev/shm), else (missing, read-only or nearly full) $TMPDIR or /tmp.
    const char* tmp = std::getenv("TMPDIR");
    std::string tried;
    for (const std::string dir : {std::string("/dev/shm"), std::string(tmp && *tmp ? tmp : "/tmp")}) {
      try {
        l = Layout();
        built = build_in(dir, spec, out, l);
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
  for (size_t i = 0; i < tensors.size(); ++i)
    if (offsets[i] >= 0) order.push_back(static_cast<int>(i));
  std::sort(order.begin(), order.end(), [&](int a, int b) { return offsets[a] < offsets[b]; });
  size_t pos = 0;
  auto segment = [&](size_t from, size_t to) {
    l.segments.push_back({from, to - from, l.meta.size()});
    l.meta.resize(l.meta.size() + (to - from));
    built.read(from, to - from, l.meta.data() + l.segments.back().meta_off);
  };
  for (int i : order) {
    size_t off = static_cast<size_t>(offsets[i]), n = tensors[i].second.nbytes();
    if (off < pos || off + n > l.size)
      throw Error("building " + path + ": dataset " + printable(tensors[i].first) + " storage out of place");
    if (off > pos) segment(pos, off);
    pos = off + n;
  }
  if (pos < l.size) segment(pos, l.size);
  return l;
}

}  // namespace

WrittenFile write_h5_file(const std::string& path, const H5FileSpec& spec) {
  const auto& tensors = *spec.tensors;
  WrittenFile out;
  out.tensor_xxh3.assign(tensors.size(), "");
  std::shared_ptr<const Layout> layout;
  std::string key;
  if (!spec.compress) {
    key = layout_key(spec);
    std::lock_guard<std::mutex> g(layout_mu);
    auto it = layouts.find(key);
    if (it != layouts.end()) layout = it->second;
  }
  if (layout) {
    for (size_t i = 0; i < tensors.size(); ++i)  // stored inside the metadata (empty, compact)
      if (layout->offsets[i] < 0) out.tensor_xxh3[i] = checksum(tensors[i].second);
    if (!tensors.empty() && spec.after_first_dataset) spec.after_first_dataset();
  } else {
    layout = std::make_shared<const Layout>(build_layout(path, spec, out));
    if (!spec.compress) {
      std::lock_guard<std::mutex> g(layout_mu);
      if (layouts.size() >= 16) layouts.clear();
      layouts.emplace(key, layout);
    }
  }
  out.tensor_offsets = layout->offsets;
  // The pieces in file order: metadata segments and the tensors' own bytes.
  std::vector<Piece> pieces;
  {
    std::vector<int> order;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (layout->offsets[i] >= 0) order.push_back(static_cast<int>(i));
    std::sort(order.begin(), order.end(), [&](int a, int b) { return layout->offsets[a] < layout->offsets[b]; });
    size_t seg = 0;
    auto segments_before = [&](size_t off) {
      for (; seg < layout->segments.size() && layout->segments[seg].file_off < off; ++seg) {
        const Layout::Segment& m = layout->segments[seg];
        pieces.push_back({layout->meta.data() + m.meta_off, m.len, -1});
      }
    };
    for (int i : order) {
      segments_before(static_cast<size_t>(layout->offsets[i]));
      pieces.push_back(
          {static_cast<const unsigned char*>(tensors[i].second.data_ptr()), tensors[i].second.nbytes(), i});
    }
    segments_before(layout->size);
  }

  Fd fd(path, O_WRONLY | O_CREAT | O_TRUNC);
  if (fd.get() < 0) fd.fail("create");
  constexpr size_t kBlock = size_t{1} << 20;  // hash a block, then hand it to write() while cached
  XxhState whole, one;
  std::vector<iovec> batch;
  size_t batched = 0;
  try {
    for (const Piece& p : pieces) {
      if (p.tensor >= 0) one.reset();
      for (size_t off = 0; off < p.len; off += kBlock) {
        size_t n = std::min(kBlock, p.len - off);
        whole.update(p.data + off, n);
        if (p.tensor >= 0) one.update(p.data + off, n);
        batch.push_back({const_cast<unsigned char*>(p.data + off), n});
        if ((batched += n) >= kBlock || batch.size() >= IOV_MAX) {
          write_all(fd, batch);
          batched = 0;
        }
      }
      if (p.tensor >= 0) out.tensor_xxh3[p.tensor] = hex64(one.digest());
    }
    write_all(fd, batch);
    if (spec.sync && ::fsync(fd.get()) != 0) fd.fail("fsync");
  } catch (...) {
    struct stat sb;
    if (::fstat(fd.get(), &sb) == 0 && S_ISREG(sb.st_mode))
      ::unlink(path.c_str());  // a partial file only takes space (a full disk stays full)
    throw;
  }
  out.bytes = static_cast<int64_t>(layout->size);
  out.xxh3 = hex64(whole.digest());
  return out;
}

FileDigest digest_file(const std::string& path) {
  Fd fd(path, O_RDONLY);
  if (fd.get() < 0) fd.fail("open");
  std::vector<unsigned char> buf(size_t{4} << 20);
  XxhState h;
  int64_t total = 0;
  for (;;) {
    ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fd.fail("read");
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
    total += n;
  }
  return {total, hex64(h.digest())};
}

}  // namespace hpctrain::ckpt
