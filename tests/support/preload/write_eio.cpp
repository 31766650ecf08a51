// LD_PRELOAD shim for crash/fault tests (test harness, not the library): write() and writev()
// to a file whose path contains PRELOAD_WRITE_EIO_PATH fail with EIO, as a failing disk would.
// Everything else (stdout, stderr, other files) is written normally. Without the variable it
// changes nothing. (libfiu's posix preload fails every write() of a process, stderr included,
// so the error line under test could not be printed: hence this narrower shim.)
#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool fails(int fd) {
  const char* pattern = std::getenv("PRELOAD_WRITE_EIO_PATH");
  if (!pattern || !*pattern || fd <= 2) return false;
  char link[64], path[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof(path) - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  return std::strstr(path, pattern) != nullptr;
}

template <class Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t n) {
  static auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
  if (fails(fd)) {
    errno = EIO;
    return -1;
  }
  return real(fd, buf, n);
}

extern "C" ssize_t writev(int fd, const struct iovec* iov, int n) {
  static auto real = next<ssize_t (*)(int, const struct iovec*, int)>("writev");
  if (fails(fd)) {
    errno = EIO;
    return -1;
  }
  return real(fd, iov, n);
}
