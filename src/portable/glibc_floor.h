// The portable build's glue to glibc 2.34 (glibc_floor.c). The wrapped functions are reached
// through the linker's --wrap; this header declares what tests call directly.
#pragma once

#include <link.h>

#ifdef __cplusplus
extern "C" {
#endif

// _dl_find_object's answer (0, and the object's map range and PT_GNU_EH_FRAME in *result; or -1
// when no loaded object holds pc) found with dl_iterate_phdr: what the unwinder uses on glibc
// 2.34, which has no _dl_find_object. dlfo_link_map is left null: the unwinder does not read it.
int gpumeter_find_object_by_phdr(void* pc, struct dl_find_object* result);

#ifdef __cplusplus
}
#endif
