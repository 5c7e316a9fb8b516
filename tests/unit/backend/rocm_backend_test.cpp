// The AMD backend's PCIe throughput reader, on a fake ROCm SMI: pcie_bw is read on a thread of
// the backend's own (the kernel counts for a second inside each read), collect() serves the last
// value, a GPU that answers NOT_SUPPORTED is not asked again, and the backend stops the thread.
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "abi/rocm_smi_api.h"
#include "backend/rocm/rocm_backend.h"

namespace gpumeter {
namespace {

std::atomic<int> g_reads[2];

rsmi_status_t fake_init(std::uint64_t) { return RSMI_STATUS_SUCCESS; }
rsmi_status_t fake_shut_down() { return RSMI_STATUS_SUCCESS; }
rsmi_status_t fake_num_devices(std::uint32_t* n) {
  *n = 2;
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t fake_version(rsmi_version_t* v) {
  *v = {5, 2, 3, nullptr};
  return RSMI_STATUS_SUCCESS;
}
rsmi_status_t fake_busy(std::uint32_t, std::uint32_t* pct) {
  *pct = 40;
  return RSMI_STATUS_SUCCESS;
}
// GPU 0: pcie_bw "1000 250 256"; GPU 1: no pcie_bw (an APU).
rsmi_status_t fake_throughput(std::uint32_t d, std::uint64_t* first, std::uint64_t* second, std::uint64_t* mps) {
  ++g_reads[d];
  if (d == 1) return RSMI_STATUS_NOT_SUPPORTED;
  *first = 1000;
  *second = 250;
  *mps = 256;
  return RSMI_STATUS_SUCCESS;
}

class FakeRocm final : public SymbolSource {
 public:
  void* symbol(const char* name) const override {
    static const std::map<std::string, void*> kSymbols = {
        {"rsmi_init", reinterpret_cast<void*>(&fake_init)},
        {"rsmi_shut_down", reinterpret_cast<void*>(&fake_shut_down)},
        {"rsmi_num_monitor_devices", reinterpret_cast<void*>(&fake_num_devices)},
        {"rsmi_version_get", reinterpret_cast<void*>(&fake_version)},
        {"rsmi_dev_busy_percent_get", reinterpret_cast<void*>(&fake_busy)},
        {"rsmi_dev_pci_throughput_get", reinterpret_cast<void*>(&fake_throughput)},
    };
    auto it = kSymbols.find(name);
    return it == kSymbols.end() ? nullptr : it->second;
  }
  const std::string& path() const override { return path_; }

 private:
  std::string path_ = "fake-rocm";
};

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
  g_reads[0] = g_reads[1] = 0;
  Logger log(LogLevel::kError);
  {
    auto backend = RocmBackend::create(std::make_unique<FakeRocm>(), log);
    ASSERT_TRUE(backend->status().up) << backend->status().detail;
    EXPECT_EQ(g_reads[0], 0);  // not started before a collection asks for PCIe
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
    ASSERT_TRUE(eventually([] { return g_reads[0] >= 2; }));
    EXPECT_EQ(g_reads[1], 1);
  }
  // Destroyed: the thread is gone and reads no more.
  const int reads = g_reads[0];
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(g_reads[0], reads);
}

}  // namespace
}  // namespace gpumeter
