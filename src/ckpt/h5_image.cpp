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
#include "ckpt/h5_layout.h"
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

// Shards of one model have the same names, dtypes and shapes at every checkpoint, and their
// metadata does not depend on the values (no times are tracked, uncompressed data is not
// HDF5's), so the metadata of the last files is reused byte for byte: the HDF5 work (a third of
// a small checkpoint's write time) is done once per layout.
std::mutex layout_mu;
std::map<std::string, std::shared_ptr<const H5Layout>> layouts;

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

}  // namespace

WrittenFile write_h5_file(const std::string& path, const H5FileSpec& spec) {
  const auto& tensors = *spec.tensors;
  WrittenFile out;
  out.tensor_xxh3.assign(tensors.size(), "");
  std::shared_ptr<const H5Layout> layout;
  std::string key;
  if (!spec.compress) {
    key = layout_key(spec);
    std::lock_guard<std::mutex> g(layout_mu);
    auto it = layouts.find(key);
    if (it != layouts.end()) layout = it->second;
  }
  if (layout) {
    if (!tensors.empty() && spec.after_first_dataset) spec.after_first_dataset();
  } else {
    H5LayoutInput in;
    for (const auto& [name, t] : tensors) in.datasets.push_back(TensorSpec::of(name, t));
    in.root_attrs = spec.root_attrs;
    in.compress_data = spec.compress ? &tensors : nullptr;
    in.after_first_dataset = spec.after_first_dataset;
    layout = std::make_shared<const H5Layout>(build_h5_layout(path, in));
    if (!spec.compress) {
      std::lock_guard<std::mutex> g(layout_mu);
      if (layouts.size() >= 16) layouts.clear();
      layouts.emplace(key, layout);
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i)  // stored inside the metadata (compressed) or empty
    if (layout->offsets[i] < 0) out.tensor_xxh3[i] = checksum(tensors[i].second);
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
        const H5Layout::Segment& m = layout->segments[seg];
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
