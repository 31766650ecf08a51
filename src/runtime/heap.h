// Handing freed heap memory back to the system.
#pragma once

namespace hpctrain {

// Returns the free pages of the C heap to the system (glibc's malloc_trim; a no-op elsewhere).
// Why: once a large block is freed, glibc serves blocks up to that size from the heap and keeps
// their pages when they are freed, so a loop that reads tensors one at a time and drops each
// would otherwise keep a multiple of the largest resident (150 MiB for a 200 MiB model). Call
// it after dropping each large buffer in such a loop; it costs a walk of the free lists.
void trim_heap();

}  // namespace hpctrain
