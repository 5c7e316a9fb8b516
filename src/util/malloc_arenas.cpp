#include "util/malloc_arenas.h"

#include <malloc.h>

#include <cstdlib>

namespace gpumeter {

void limit_malloc_arenas(int arenas) {
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) ::mallopt(M_ARENA_MAX, arenas);
}

}  // namespace gpumeter
