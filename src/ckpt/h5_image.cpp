#include "ckpt/h5_image.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ckpt/h5_tensor.h"
#include "runtime/check.h"

namespace hpctrain::ckpt {
namespace {

// The core driver's buffer: a private anonymous mapping (lazily backed), grown with mremap.
// HDF5 frees nothing: the mapping lives until the MemImage does.
struct MemImage {
  unsigned char* base = nullptr;
  size_t cap = 0;
  size_t eof = 0;  // what the driver last asked for
  // `populate`: bytes to fault in now, in one call (the core driver zero-fills the file's whole
  // address range as it grows; page by page on a fresh mapping that is a trap per 4 KiB).
  MemImage(size_t reserve, size_t populate) : cap(reserve) {
    void* p = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw Error(std::string("cannot reserve memory for an HDF5 image: ") + std::strerror(errno));
    base = static_cast<unsigned char*>(p);
#ifdef MADV_POPULATE_WRITE
    (void)::madvise(base, std::min(populate, cap), MADV_POPULATE_WRITE);  // advice: may fail (old kernels)
#endif
  }
  ~MemImage() { ::munmap(base, cap); }
  void* resize(size_t n) {
    if (n > cap) {
      size_t want = std::max(n, cap * 2);
      void* p = ::mremap(base, cap, want, MREMAP_MAYMOVE);
      if (p == MAP_FAILED) return nullptr;
      base = static_cast<unsigned char*>(p);
      cap = want;
    }
    eof = n;
    return base;
  }

  static void* cb_malloc(size_t n, H5FD_file_image_op_t, void* u) { return static_cast<MemImage*>(u)->resize(n); }
  static void* cb_memcpy(void* d, const void* s, size_t n, H5FD_file_image_op_t, void*) { return std::memcpy(d, s, n); }
  static void* cb_realloc(void*, size_t n, H5FD_file_image_op_t, void* u) { return static_cast<MemImage*>(u)->resize(n); }
  static herr_t cb_free(void*, H5FD_file_image_op_t, void*) { return 0; }
  static void* cb_udata_copy(void* u) { return u; }
  static herr_t cb_udata_free(void*) { return 0; }
};

// The mapping of the last image, reused by the next one: HDF5's core driver zero-fills the
// whole address range of the file (the tensors' ranges too) as it grows, and on fresh pages
// that is a page fault per 4 KiB (~0.6 ms per MiB here, more than the write itself); on the
// recycled mapping it is a plain memset. So one file-sized mapping stays resident between
// checkpoints, like the writer's host copy of the tensors.
std::mutex spare_mu;
std::unique_ptr<MemImage> spare;

std::unique_ptr<MemImage> take_image(size_t need, size_t populate) {
  std::lock_guard<std::mutex> g(spare_mu);
  if (spare && spare->cap >= need) {
    spare->eof = 0;
    return std::move(spare);
  }
  spare.reset();
  return std::make_unique<MemImage>(need, populate);
}

void recycle_image(std::unique_ptr<MemImage> m) {
  std::lock_guard<std::mutex> g(spare_mu);
  if (!spare || spare->cap < m->cap) spare = std::move(m);
}

// One stretch of the output file: image bytes (tensor < 0) or a tensor's own bytes.
struct Piece {
  const unsigned char* data;
  size_t len;
  int tensor;
};

// H5Fget_file_image clears the superblock's file consistency flags (the open file has "open
// for writing" there); the bytes we write must be that image. Superblock v0/v1: 4 bytes at 20.
void clear_open_flags(unsigned char* image, size_t size, const std::string& path) {
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (size < 24 || std::memcmp(image, sig, 8) != 0 || image[8] > 1)
    throw Error("building " + path + ": unexpected HDF5 superblock (version " +
                std::to_string(size > 8 ? image[8] : -1) + ")");
  std::memset(image + 20, 0, 4);
}

class Fd {
 public:
  Fd(const std::string& path, int flags) : path_(path), fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {}
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

Layout build_layout(const std::string& path, const H5FileSpec& spec, WrittenFile& out) {
  const auto& tensors = *spec.tensors;
  size_t payload = 0;
  for (const auto& [name, t] : tensors) payload += t.nbytes();
  std::unique_ptr<MemImage> owned = take_image(payload + (size_t{64} << 20), payload + (size_t{1} << 20));
  MemImage& mem = *owned;
  Layout l;
  std::vector<int64_t>& offsets = l.offsets;
  offsets.assign(tensors.size(), -1);

  auto g = h5::lock();
  h5::silence_errors();
  h5::Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  H5FD_file_image_callbacks_t cb = {MemImage::cb_malloc, MemImage::cb_memcpy, MemImage::cb_realloc,
                                    MemImage::cb_free, MemImage::cb_udata_copy, MemImage::cb_udata_free, &mem};
  if (H5Pset_fapl_core(fapl.get(), size_t{1} << 20, 0) < 0 || H5Pset_file_image_callbacks(fapl.get(), &cb) < 0)
    throw Error("building " + path + ": cannot set up HDF5's in-memory driver");
  h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  if (!file.valid()) throw Error("cannot create HDF5 file " + path + " in memory");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i].second;
    offsets[i] = create_dataset(file.get(), tensors[i].first, t, spec.compress, /*write_data=*/spec.compress);
    if (offsets[i] < 0) out.tensor_xxh3[i] = checksum(t);
    if (i == 0 && spec.after_first_dataset) spec.after_first_dataset();
  }
  for (const auto& [k, v] : spec.root_attrs) h5::write_attr_string(file.get(), k, v);
  if (H5Fflush(file.get(), H5F_SCOPE_LOCAL) < 0) throw Error("building " + path + ": HDF5 flush failed");
  ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size <= 0 || static_cast<size_t>(size) > mem.eof)
    throw Error("building " + path + ": HDF5 file image unavailable");
  l.size = static_cast<size_t>(size);
  clear_open_flags(mem.base, l.size, path);

  // The file in order: image bytes between the tensors' storage.
  std::vector<int> order;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (offsets[i] >= 0) order.push_back(static_cast<int>(i));
  std::sort(order.begin(), order.end(), [&](int a, int b) { return offsets[a] < offsets[b]; });
  size_t pos = 0;
  auto segment = [&](size_t from, size_t to) {
    l.segments.push_back({from, to - from, l.meta.size()});
    l.meta.insert(l.meta.end(), mem.base + from, mem.base + to);
  };
  for (int i : order) {
    size_t off = static_cast<size_t>(offsets[i]), n = tensors[i].second.nbytes();
    if (off < pos || off + n > l.size)
      throw Error("building " + path + ": dataset " + printable(tensors[i].first) + " storage out of place");
    if (off > pos) segment(pos, off);
    pos = off + n;
  }
  if (pos < l.size) segment(pos, l.size);
  file.reset();
  fapl.reset();
  g.unlock();
  recycle_image(std::move(owned));
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
      pieces.push_back({static_cast<const unsigned char*>(tensors[i].second.data_ptr()), tensors[i].second.nbytes(), i});
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
