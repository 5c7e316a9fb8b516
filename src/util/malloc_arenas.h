#pragma once
// glibc gives each thread that allocates an arena of its own, up to 8 per core, and each arena
// keeps its own free memory: a process whose threads allocate at different times peaks higher
// than its live memory. Two arenas keep the peak near the live memory without the lock
// contention of one.

namespace gpumeter {

// At most `arenas` malloc arenas, unless MALLOC_ARENA_MAX in the environment says otherwise.
void limit_malloc_arenas(int arenas = 2);

}  // namespace gpumeter
