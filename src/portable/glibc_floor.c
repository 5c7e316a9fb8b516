// The portable build's glibc floor is 2.34 (docs/packaging.md). It links archives built on
// Debian 12's glibc 2.36 that call three functions newer than the floor: arc4random (2.36;
// libstdc++'s std::random_device), arc4random_buf (2.36; libxcrypt's salts for bcrypt) and
// _dl_find_object (2.35; GCC's unwinder finds a frame's unwind tables with it). The linker sends
// those calls here (-Wl,--wrap, cmake/Portable.cmake), so the binaries need no glibc symbol newer
// than 2.34; scripts/release.sh checks that they do not.
// No library provides this: it is the glue between two toolchain archives and an older libc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "portable/glibc_floor.h"

// glibc's arc4random_buf never fails and never blocks once the kernel's pool is ready;
// getrandom() (glibc 2.25, Linux 3.17) gives the same bytes from the same source.
void __wrap_arc4random_buf(void* buf, size_t size) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = getrandom((char*)buf + got, size - got, 0);
    if (n > 0)
      got += (size_t)n;
    else if (errno != EINTR)
      break;  // ENOSYS before Linux 3.17: the rest keeps what it has
  }
}

uint32_t __wrap_arc4random(void) {
  uint32_t value = 0;
  __wrap_arc4random_buf(&value, sizeof value);
  return value;
}

typedef int (*find_object_fn)(void*, struct dl_find_object*);

struct find_request {
  uintptr_t pc;
  struct dl_find_object* result;
  int found;
};

// dl_iterate_phdr's callback: the object whose PT_LOAD segments hold the address.
static int find_in_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct find_request* req = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0, eh_frame = 0;
  int holds = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD) {
      if (start < lo) lo = start;
      if (start + ph->p_memsz > hi) hi = start + ph->p_memsz;
      if (req->pc >= start && req->pc < start + ph->p_memsz) holds = 1;
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      eh_frame = start;
    }
  }
  if (!holds) return 0;
  req->result->dlfo_flags = 0;
  req->result->dlfo_map_start = (void*)lo;
  req->result->dlfo_map_end = (void*)hi;
  req->result->dlfo_link_map = NULL;
  req->result->dlfo_eh_frame = (void*)eh_frame;
  req->found = 1;
  return 1;
}

int gpumeter_find_object_by_phdr(void* pc, struct dl_find_object* result) {
  struct find_request req = {(uintptr_t)pc, result, 0};
  dl_iterate_phdr(find_in_object, &req);
  return req.found ? 0 : -1;
}

static find_object_fn glibc_find_object;

static void look_up_find_object(void) {
  void* symbol = dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35");
  memcpy(&glibc_find_object, &symbol, sizeof glibc_find_object);  // ISO C: no cast to a function
}

// glibc's own _dl_find_object where there is one (2.35 and newer: lock-free, the unwinder's fast
// path); on 2.34 the same answer from dl_iterate_phdr, as the unwinder found it before 2.35.
int __wrap__dl_find_object(void* pc, struct dl_find_object* result) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, look_up_find_object);
  if (glibc_find_object != NULL) return glibc_find_object(pc, result);
  return gpumeter_find_object_by_phdr(pc, result);
}
