// Owner labels from the fixture processes, a kubelet pod, the HPC mapping and project rules.

#include "attribution/owner_builder.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace gpumeter {
namespace {

using testing::fixture;

ProcessInfo read(const std::string& layout, unsigned pid) {
  ProcfsReader reader(fixture(layout) + "/proc", fixture(layout),
                      {"GPUMETER_PROJECT", "SLURM_JOB_ID", "SLURM_JOB_ACCOUNT"});
  auto info = reader.read(pid);
  EXPECT_TRUE(info.ok()) << info.error().message;
  return info.ok() ? *info : ProcessInfo{};
}

ProjectResolver rules() {
  auto r = ProjectResolver::create({{"env.GPUMETER_PROJECT", {}, {}, {}},
                                    {"slurm_account", {}, {}, {}},
                                    {"namespace", "team-(.*)", "$1", {}},
                                    {"user", {}, {}, std::map<std::string, std::string>{{"alice", "climate"}}}},
                                   "unassigned");
  EXPECT_TRUE(r.ok());
  return *r;
}

TEST(attribution_owner, DockerContainerOutsideKubernetes) {
  OwnerLabels o = build_owner(read("docker-v1", 4242), nullptr, {}, rules());
  EXPECT_EQ(o, (OwnerLabels{"vision", "alice", "", "", "3f4e9a1c8b2d", ""}));
}

TEST(attribution_owner, KubernetesPodFromTheKubelet) {
  PodRef pod{"team-nlp", "bert-train-0", "trainer"};
  ProcessInfo p = read("k8s-guaranteed", 7001);
  OwnerLabels o = build_owner(p, &pod, {}, rules());
  EXPECT_EQ(o, (OwnerLabels{"nlp", "alice", "team-nlp", "bert-train-0", "trainer", ""}));

  // Without the pod, the container label is the short container id and the namespace rule
  // cannot apply; the user map does.
  OwnerLabels no_pod = build_owner(p, nullptr, {}, rules());
  EXPECT_EQ(no_pod, (OwnerLabels{"climate", "alice", "", "", "0c1d2e3f4a5b", ""}));
}

TEST(attribution_owner, SlurmJobFromTheCgroupWinsOverTheMapping) {
  ProcessInfo p = read("slurm-v1", 9001);
  OwnerLabels o = build_owner(p, nullptr, {"999"}, rules());
  EXPECT_EQ(o, (OwnerLabels{"climate", "carol", "", "", "", "4242"}));
  EXPECT_EQ(build_owner(read("slurm-v2", 9002), nullptr, {}, rules()),
            (OwnerLabels{"physics", "bob", "", "", "", "4243"}));
}

TEST(attribution_owner, HpcJobsFromTheMappingThenTheEnvironment) {
  ProcessInfo p = read("systemd-service", 3003);
  EXPECT_EQ(build_owner(p, nullptr, {"11", "12"}, rules()).hpc_job, "11,12");
  EXPECT_EQ(build_owner(p, nullptr, {}, rules()).hpc_job, "");
  p.env.emplace_back("SLURM_JOB_ID", "555");
  EXPECT_EQ(build_owner(p, nullptr, {}, rules()).hpc_job, "555");
  EXPECT_EQ(build_owner(p, nullptr, {"11"}, rules()).hpc_job, "11");
}

TEST(attribution_owner, TheMappingDoesNotNameAProcessOfALoginSessionOrAContainer) {
  // The mapping lists a GPU's jobs; a process its cgroup places elsewhere only shares the GPU
  // (a user bypassing the scheduler), whatever the mapping says.
  ProcessInfo p = read("user-session", 3100);
  EXPECT_EQ(build_owner(p, nullptr, {"11", "12"}, rules()).hpc_job, "");
  EXPECT_EQ(build_owner(p, nullptr, {}, rules()).project, "thesis");
  p.env.emplace_back("SLURM_JOB_ID", "555");
  EXPECT_EQ(build_owner(p, nullptr, {"11"}, rules()).hpc_job, "555");
  EXPECT_EQ(build_owner(read("hybrid", 8001), nullptr, {"11"}, rules()).hpc_job, "") << "a pod's process";
}

TEST(attribution_owner, DefaultProjectAndNumericUser) {
  OwnerLabels o = build_owner(read("hybrid", 8001), nullptr, {}, rules());
  EXPECT_EQ(o, (OwnerLabels{"unassigned", "2000", "", "", "7d8e9f0a1b2c", ""}));
  EXPECT_EQ(build_owner(read("hybrid", 8001), nullptr, {}, ProjectResolver()).project, "");
}

// Every owner label value is copied into each series of its owner, and Prometheus fails a whole
// scrape on one value over its label_value_length_limit: a value over kMaxLabelValueBytes, from a
// user's environment, pod or passwd entry, is left empty rather than served or cut.
TEST(attribution_owner, LabelValuesLongerThanTheLimitAreLeftEmpty) {
  const std::string fits(kMaxLabelValueBytes, '7');
  const std::string over(kMaxLabelValueBytes + 1, '7');
  ProcessInfo p;
  p.pid = 1;
  p.uid = 1000;
  p.user = "alice";
  p.env = {{"SLURM_JOB_ID", fits}};
  EXPECT_EQ(build_owner(p, nullptr, {}, rules()).hpc_job, fits);
  p.env = {{"SLURM_JOB_ID", over}};
  EXPECT_EQ(build_owner(p, nullptr, {}, rules()).hpc_job, "");
  // The mapping's jobs, joined: each may be 256 bytes, so two of them are too many.
  EXPECT_EQ(build_owner(p, nullptr, {fits, "1"}, rules()).hpc_job, "");

  // Pod names are at most 253 characters in Kubernetes, but the kubelet's reply is not checked.
  PodRef pod{std::string(63, 'n'), std::string(253, 'p'), over};
  OwnerLabels o = build_owner(p, &pod, {}, rules());
  EXPECT_EQ(o.namespace_, pod.namespace_);
  EXPECT_EQ(o.pod, pod.pod);
  EXPECT_EQ(o.container, "");

  p.user = over;
  o = build_owner(p, nullptr, {}, rules());
  EXPECT_EQ(o.user, "");
  EXPECT_EQ(o.project, "unassigned");  // the user map does not know it either

  // A project a rule would take from the user's environment falls through to the next rule.
  p.user = "alice";
  p.env = {{"GPUMETER_PROJECT", over}};
  EXPECT_EQ(build_owner(p, nullptr, {}, rules()).project, "climate");
  p.env = {{"GPUMETER_PROJECT", fits}};
  EXPECT_EQ(build_owner(p, nullptr, {}, rules()).project, fits);
  // Rules still see the whole value.
  p.env = {{"GPUMETER_PROJECT", over}};
  EXPECT_EQ(attributes_of(p, nullptr, {}).get("env.GPUMETER_PROJECT"), over);
}

TEST(attribution_owner, AttributesShowEverythingRulesCanRead) {
  PodRef pod{"ns", "p", "c"};
  Attributes a = attributes_of(read("slurm-v1", 9001), &pod, {"9"});
  EXPECT_EQ(a.get("user"), "carol");
  EXPECT_EQ(a.get("uid"), "1002");
  EXPECT_EQ(a.get("comm"), "python");
  EXPECT_EQ(a.get("cgroup"), "/slurm/uid_1002/job_4242/step_0/task_0");
  EXPECT_EQ(a.get("slurm_job"), "4242");
  EXPECT_EQ(a.get("hpc_job"), "4242");
  EXPECT_EQ(a.get("slurm_account"), "climate");
  EXPECT_EQ(a.get("env.SLURM_JOB_ID"), "4242");
  EXPECT_EQ(a.get("namespace"), "ns");
  EXPECT_EQ(a.get("pod"), "p");
  EXPECT_EQ(a.get("container"), "c");
  EXPECT_EQ(a.get("env.SLURM_JOB_USER"), "") << "not allow-listed";

  Attributes k = attributes_of(read("k8s-burstable", 7002), nullptr, {});
  EXPECT_EQ(k.get("pod_uid"), "9b5a0d2f-3c4e-4f6a-8b7c-8d9e0f1a2b3c");
  EXPECT_EQ(k.get("container_id").size(), 64u);
  EXPECT_EQ(k.get("env.GPUMETER_PROJECT"), "nlp");
  EXPECT_EQ(attributes_of(read("systemd-service", 3003), nullptr, {}).get("systemd_unit"), "jupyter.service");
  // Every documented name is present in the view.
  for (std::string_view n : kAttributeNames) {
    if (n == "slurm_account") continue;  // an alias, shown as env.SLURM_JOB_ACCOUNT
    EXPECT_EQ(a.values().count(n), 1u) << n;
  }
}

}  // namespace
}  // namespace gpumeter
