#pragma once
// Names the calling thread, so `top -H`, `ps -L` and /proc/<pid>/task/<tid>/comm tell the
// agent's threads apart (and bench/profile.py can bill CPU time to each role).

#include <pthread.h>

#include <string>

namespace gpumeter {

// Linux keeps 15 bytes of a thread's name; a longer one is cut.
inline void name_this_thread(const std::string& name) {
  ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace gpumeter
