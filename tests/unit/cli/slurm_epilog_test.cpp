// `gpumeter slurm epilog`'s figures: a job's ledger totals from an agent's exposition, priced,
// and the AdminComment sacctmgr keeps as written (no quotes, no spaces).
#include "cli/slurm_epilog.h"

#include <gtest/gtest.h>

#include <cctype>

namespace gpumeter::cli {
namespace {

const char* const kExposition = R"(# HELP gpu_info GPU identity.
# TYPE gpu_info gauge
gpu_info{gpu="0",uuid="GPU-a",model="NVIDIA H100 80GB HBM3",vendor="nvidia"} 1
gpu_info{gpu="1",uuid="GPU-b",model="NVIDIA L4",vendor="nvidia"} 1
# TYPE gpu_allocated_seconds_total counter
gpu_allocated_seconds_total{gpu="0",uuid="GPU-a",project="chem",hpc_job="42"} 3600
gpu_allocated_seconds_total{gpu="1",uuid="GPU-b",project="chem",hpc_job="42"} 1800
gpu_allocated_seconds_total{gpu="1",uuid="GPU-b",project="bio",user="a \"quoted\", name",hpc_job="7"} 900
gpu_allocated_seconds_total{gpu="0",uuid="GPU-a",project="__idle__"} 100
gpu_busy_seconds_total{gpu="0",uuid="GPU-a",project="chem",hpc_job="42"} 1800
gpu_busy_seconds_total{gpu="1",uuid="GPU-b",project="chem",hpc_job="42"} 900
gpu_memory_byte_seconds_total{gpu="0",uuid="GPU-a",project="chem",hpc_job="42"} 3.865470566400e+12
gpu_attributed_energy_joules_total{gpu="0",uuid="GPU-a",project="chem",hpc_job="42"} 1.44e6
gpu_attributed_energy_joules_total{gpu="1",uuid="GPU-b",project="chem",hpc_job="42"} 3.6e5
gpu_attributed_energy_joules_total_created{gpu="0",uuid="GPU-a",project="chem",hpc_job="42"} 1.7e9
)";

TEST(SlurmEpilog, AJobsTotalsAreItsSeriesOnEveryGpu) {
  auto s = summarize_job(kExposition, "42", nullptr, 0);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->gpus, (std::set<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ(s->gpu_seconds, 5400);
  EXPECT_EQ(s->busy_seconds, 2700);
  EXPECT_EQ(s->memory_byte_seconds, 3.8654705664e12);
  EXPECT_EQ(s->energy_joules, 1.8e6);
  EXPECT_FALSE(s->cost);
  EXPECT_EQ(admin_comment(*s),
            "gpumeter=1;gpus=2;gpu_seconds=5400.000000;busy_seconds=2700.000000;memory_gib_hours=1.000000;"
            "energy_kwh=0.500000");
  // Another job's labels, escapes included, do not disturb the reading.
  auto other = summarize_job(kExposition, "7", nullptr, 0);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->gpu_seconds, 900);
  auto none = summarize_job(kExposition, "8", nullptr, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->gpus.empty());
}

TEST(SlurmEpilog, CostAtThePricesInForceByModel) {
  auto p = pricing::parse_pricing(
      "currency: EUR\ngpu_models: {\"NVIDIA H100 80GB HBM3\": {gpu_hour: 4, busy_gpu_hour: 2}, \"*\": {gpu_hour: 1}}\n"
      "energy: {kwh: 0.5, pue: 1.2}\n",
      "p.yaml");
  ASSERT_TRUE(p.ok());
  auto s = summarize_job(kExposition, "42", &*p, 0);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->cost);
  // H100: 1 h x 4 + 0.5 h x 2 + 0.4 kWh x 0.6; L4 at "*": 0.5 h x 1 + 0.1 kWh x 0.6.
  EXPECT_NEAR(*s->cost, 4 + 1 + 0.24 + 0.5 + 0.06, 1e-12);
  EXPECT_EQ(admin_comment(*s).substr(admin_comment(*s).find(";cost=")), ";cost=5.800000;currency=eur");
  const std::string comment = admin_comment(*s);
  EXPECT_EQ(comment.find_first_of("\"' `"), std::string::npos) << comment;
  for (char c : comment) EXPECT_FALSE(std::isupper(static_cast<unsigned char>(c))) << comment;
}

TEST(SlurmEpilog, AMalformedLineOfTheLedgerIsAnError) {
  auto s = summarize_job("gpu_busy_seconds_total{uuid=\"GPU-a\",hpc_job=\"42\" 12\n", "42", nullptr, 0);
  EXPECT_FALSE(s.ok());
  s = summarize_job("gpu_busy_seconds_total{uuid=\"GPU-a\",hpc_job=\"42\"} twelve\n", "42", nullptr, 0);
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace gpumeter::cli
