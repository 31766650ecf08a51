// LD_PRELOAD shim for fault tests (test harness, not the library): write(), writev(), read(),
// pread() and pread64() on a file whose path contains PRELOAD_IO_HANG_PATH block, as on a hung
// file system. When PRELOAD_IO_HANG_MARK names a file, it is created when a call starts to
// block (so a test knows the process got that far); when PRELOAD_IO_HANG_RELEASE names a file,
// the call goes on once that file exists (polled every 10 ms), else it blocks forever.
// Everything else is done normally; without the variable it changes nothing. (glibc's stdio
// writes through an internal call that no shim sees: hold a process in its file I/O instead.)
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

bool matches(int fd) {
  const char* pattern = std::getenv("PRELOAD_IO_HANG_PATH");
  if (!pattern || !*pattern) return false;
  char link[64], path[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof(path) - 1);
  if (n <= 0) return false;
  path[n] = '\0';
  return std::strstr(path, pattern) != nullptr;
}

void hang() {
  if (const char* mark = std::getenv("PRELOAD_IO_HANG_MARK"); mark && *mark) {
    int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
  }
  const char* release = std::getenv("PRELOAD_IO_HANG_RELEASE");
  for (;;) {
    if (release && *release && access(release, F_OK) == 0) return;
    usleep(10000);
  }
}

template <class Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t n) {
  static auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
  if (matches(fd)) hang();
  return real(fd, buf, n);
}

extern "C" ssize_t writev(int fd, const struct iovec* iov, int n) {
  static auto real = next<ssize_t (*)(int, const struct iovec*, int)>("writev");
  if (matches(fd)) hang();
  return real(fd, iov, n);
}

extern "C" ssize_t read(int fd, void* buf, size_t n) {
  static auto real = next<ssize_t (*)(int, void*, size_t)>("read");
  if (matches(fd)) hang();
  return real(fd, buf, n);
}

extern "C" ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  static auto real = next<ssize_t (*)(int, void*, size_t, off_t)>("pread");
  if (matches(fd)) hang();
  return real(fd, buf, n, off);
}

extern "C" ssize_t pread64(int fd, void* buf, size_t n, off64_t off) {
  static auto real = next<ssize_t (*)(int, void*, size_t, off64_t)>("pread64");
  if (matches(fd)) hang();
  return real(fd, buf, n, off);
}
