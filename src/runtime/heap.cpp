// trim_heap: malloc_trim(0) where the C library is glibc.
#include "runtime/heap.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace hpctrain {

void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace hpctrain
