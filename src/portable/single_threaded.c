// The simulated libnvidia-ml.so.1 of the portable build links yaml-cpp from Debian's archive,
// which is compiled as position-independent executable code, not shared-library code: it reads
// glibc's __libc_single_threaded directly, as an executable may, and a shared object cannot
// (the linker refuses the relocation). This definition, local to the library (its version script
// exports only NVML's functions), takes those reads. It says "not single-threaded", always:
// shared_ptr and the like then always use atomic operations, which is correct in every process
// (glibc's flag only lets a process that never started a thread skip them).
char __libc_single_threaded = 0;
