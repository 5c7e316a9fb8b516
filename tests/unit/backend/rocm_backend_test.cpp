// The AMD backend's PCIe throughput reader, on the scripted ROCm SMI (fake_rocm_smi.h): pcie_bw is
// read on a thread of the backend's own (the kernel counts for a second inside each read),
// collect() serves the last value, a GPU that answers NOT_SUPPORTED is not asked again, and the
// backend stops the thread.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "backend/rocm/rocm_backend.h"
#include "fake_rocm_smi.h"

namespace gpumeter {
namespace {

template <typename Pred>
bool eventually(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

TEST(RocmBackendPcie, ReaderThreadServesTheLastEstimateAndSkipsUnsupportedGpus) {
  // GPU 0: pcie_bw "1000 250 256"; GPU 1: no pcie_bw (an APU).
  fake_rocm::reset();
  fake_rocm::script().gpus.resize(2);
  fake_rocm::script().gpus[1].pcie_throughput.reset();
  fake_rocm::script().pcie_throughput = true;
  Logger log(LogLevel::kError);
  {
    auto backend = RocmBackend::create(std::make_unique<fake_rocm::FakeRocmSmi>(), log);
    ASSERT_TRUE(backend->status().up) << backend->status().detail;
    EXPECT_EQ(fake_rocm::throughput_reads(0), 0);  // not started before a collection asks for PCIe
    auto first = backend->collect(0);
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE(eventually([&] { return backend->collect(0)->pcie.receive_bytes_per_second.has_value(); }));
    auto r = backend->collect(0);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->pcie.receive_bytes_per_second, 1000.0 * 256);
    EXPECT_EQ(r->pcie.transmit_bytes_per_second, 250.0 * 256);
    auto other = backend->collect(1);
    ASSERT_TRUE(other.ok());
    EXPECT_FALSE(other->pcie.receive_bytes_per_second);
    // Without the pcie collector nothing is served.
    CollectorSet no_pcie = CollectorSet::all();
    no_pcie.set(CollectorId::kPcie, false);
    EXPECT_FALSE(backend->collect(0, CollectScope::kFull, no_pcie)->pcie.receive_bytes_per_second);
    // A round a second at most: wait for a second round, then GPU 1 has been asked once.
    ASSERT_TRUE(eventually([] { return fake_rocm::throughput_reads(0) >= 2; }));
    EXPECT_EQ(fake_rocm::throughput_reads(1), 1);
  }
  // Destroyed: the thread is gone and reads no more.
  const int reads = fake_rocm::throughput_reads(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(fake_rocm::throughput_reads(0), reads);
}

}  // namespace
}  // namespace gpumeter
