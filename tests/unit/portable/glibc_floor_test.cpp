// The portable build's replacement of _dl_find_object for glibc 2.34 answers as glibc 2.35+ does,
// for code in the test itself, in libc and in libstdc++, and fails where no object is mapped.
#include "portable/glibc_floor.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <stdexcept>

namespace {

void expect_same_answer(void* pc) {
  dl_find_object ours{}, glibc{};
  ASSERT_EQ(_dl_find_object(pc, &glibc), 0);
  ASSERT_EQ(gpumeter_find_object_by_phdr(pc, &ours), 0);
  EXPECT_EQ(ours.dlfo_map_start, glibc.dlfo_map_start);
  EXPECT_EQ(ours.dlfo_map_end, glibc.dlfo_map_end);
  EXPECT_EQ(ours.dlfo_eh_frame, glibc.dlfo_eh_frame);
  EXPECT_NE(ours.dlfo_eh_frame, nullptr);
}

int in_this_binary() { return 42; }

}  // namespace

TEST(GlibcFloor, FindsTheObjectOfCodeInTheBinary) { expect_same_answer(reinterpret_cast<void*>(&in_this_binary)); }

TEST(GlibcFloor, FindsTheObjectOfCodeInSharedLibraries) {
  expect_same_answer(reinterpret_cast<void*>(&std::printf));
  // A function of the C++ runtime: libstdc++'s exception machinery.
  expect_same_answer(reinterpret_cast<void*>(&std::rethrow_exception));
}

TEST(GlibcFloor, FailsWhereNoObjectIsMapped) {
  dl_find_object result{};
  int on_the_stack = 0;  // the stack belongs to no loaded object
  EXPECT_EQ(gpumeter_find_object_by_phdr(&on_the_stack, &result), -1);
  EXPECT_EQ(gpumeter_find_object_by_phdr(nullptr, &result), -1);
}
