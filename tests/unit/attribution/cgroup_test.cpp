// /proc/<pid>/cgroup layouts: one test per runtime, orchestrator driver and batch system,
// with the text as the kernel writes it.

#include "attribution/cgroup.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpumeter {
namespace {

const std::string kId = "3f4e9a1c8b2d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f";
const std::string kId2 = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
const std::string kUid = "8a4f9c1e-2b3d-4e5f-9a6b-7c8d9e0f1a2b";
const std::string kUidSystemd = "8a4f9c1e_2b3d_4e5f_9a6b_7c8d9e0f1a2b";

TEST(attribution_cgroup, DockerCgroupfsDriverV1) {
  std::string text =
      "12:pids:/docker/" + kId + "\n5:cpu,cpuacct:/docker/" + kId + "\n1:name=systemd:/docker/" + kId + "\n";
  CgroupInfo c = parse_cgroup(text);
  EXPECT_EQ(c.version, CgroupVersion::kV1);
  EXPECT_EQ(c.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.pod_uid, "");
  EXPECT_EQ(c.qos, PodQos::kNone);
  EXPECT_EQ(c.systemd_unit, "");
}

TEST(attribution_cgroup, DockerSystemdDriverV2) {
  CgroupInfo c = parse_cgroup("0::/system.slice/docker-" + kId + ".scope\n");
  EXPECT_EQ(c.version, CgroupVersion::kV2);
  EXPECT_EQ(c.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.systemd_unit, "") << "a container's scope is not a systemd unit of interest";
  EXPECT_EQ(c.path, "/system.slice/docker-" + kId + ".scope");
}

TEST(attribution_cgroup, KubernetesSystemdDriverQosClasses) {
  CgroupInfo g =
      parse_cgroup("0::/kubepods.slice/kubepods-pod" + kUidSystemd + ".slice/cri-containerd-" + kId + ".scope\n");
  EXPECT_EQ(g.pod_uid, kUid);
  EXPECT_EQ(g.qos, PodQos::kGuaranteed);
  EXPECT_EQ(g.runtime, ContainerRuntime::kContainerd);
  EXPECT_EQ(g.container_id, kId);

  CgroupInfo b = parse_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd +
                              ".slice/cri-containerd-" + kId + ".scope\n");
  EXPECT_EQ(b.pod_uid, kUid);
  EXPECT_EQ(b.qos, PodQos::kBurstable);

  CgroupInfo be = parse_cgroup("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + kUidSystemd +
                               ".slice/cri-containerd-" + kId + ".scope\n");
  EXPECT_EQ(be.pod_uid, kUid);
  EXPECT_EQ(be.qos, PodQos::kBestEffort);
  EXPECT_EQ(to_string(be.qos), "besteffort");
}

TEST(attribution_cgroup, KubernetesCgroupfsDriver) {
  CgroupInfo b = parse_cgroup("4:memory:/kubepods/burstable/pod" + kUid + "/" + kId + "\n");
  EXPECT_EQ(b.pod_uid, kUid);
  EXPECT_EQ(b.qos, PodQos::kBurstable);
  EXPECT_EQ(b.runtime, ContainerRuntime::kContainerd);
  EXPECT_EQ(b.container_id, kId);

  CgroupInfo g = parse_cgroup("4:memory:/kubepods/pod" + kUid + "/" + kId + "\n");
  EXPECT_EQ(g.pod_uid, kUid);
  EXPECT_EQ(g.qos, PodQos::kGuaranteed);

  CgroupInfo be = parse_cgroup("0::/kubepods/besteffort/pod" + kUid + "/" + kId + "\n");
  EXPECT_EQ(be.qos, PodQos::kBestEffort);
  EXPECT_EQ(be.version, CgroupVersion::kV2);
}

TEST(attribution_cgroup, KubernetesUnderPrefixes) {
  // A kubelet whose cgroup root is below system.slice, and a kind node (a Docker container
  // running a kubelet with the kubelet- prefix): the innermost container is the pod's.
  CgroupInfo nested = parse_cgroup("0::/system.slice/kubepods/burstable/pod" + kUid + "/" + kId + "\n");
  EXPECT_EQ(nested.pod_uid, kUid);
  EXPECT_EQ(nested.container_id, kId);

  CgroupInfo kind = parse_cgroup("0::/system.slice/docker-" + kId2 +
                                 ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
                                 "kubelet-kubepods-besteffort-pod" +
                                 kUidSystemd + ".slice/cri-containerd-" + kId + ".scope\n");
  EXPECT_EQ(kind.pod_uid, kUid);
  EXPECT_EQ(kind.qos, PodQos::kBestEffort);
  EXPECT_EQ(kind.runtime, ContainerRuntime::kContainerd);
  EXPECT_EQ(kind.container_id, kId);

  CgroupInfo kind_cgroupfs = parse_cgroup("0::/docker/" + kId2 + "/kubepods/pod" + kUid + "/" + kId + "\n");
  EXPECT_EQ(kind_cgroupfs.container_id, kId);
  EXPECT_EQ(kind_cgroupfs.qos, PodQos::kGuaranteed);

  // containerd's own "slice:prefix:id" notation.
  CgroupInfo k3s = parse_cgroup("0::/system.slice/containerd.service/kubepods-burstable-pod" + kUidSystemd +
                                ".slice:cri-containerd:" + kId + "\n");
  EXPECT_EQ(k3s.pod_uid, kUid);
  EXPECT_EQ(k3s.qos, PodQos::kBurstable);
  EXPECT_EQ(k3s.container_id, kId);
}

TEST(attribution_cgroup, CrioAndItsMonitor) {
  std::string pod = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd + ".slice/";
  CgroupInfo c = parse_cgroup("0::" + pod + "crio-" + kId + ".scope\n");
  EXPECT_EQ(c.runtime, ContainerRuntime::kCrio);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(to_string(c.runtime), "cri-o");

  CgroupInfo conmon = parse_cgroup("0::" + pod + "crio-conmon-" + kId + ".scope\n");
  EXPECT_EQ(conmon.runtime, ContainerRuntime::kNone);
  EXPECT_EQ(conmon.container_id, "");
  EXPECT_EQ(conmon.systemd_unit, "");
  EXPECT_EQ(conmon.pod_uid, kUid);

  CgroupInfo cgroupfs = parse_cgroup("0::/kubepods/burstable/pod" + kUid + "/crio-" + kId + "\n");
  EXPECT_EQ(cgroupfs.runtime, ContainerRuntime::kCrio);
  EXPECT_EQ(cgroupfs.container_id, kId);
}

TEST(attribution_cgroup, Podman) {
  CgroupInfo c =
      parse_cgroup("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + kId + ".scope/container\n");
  EXPECT_EQ(c.runtime, ContainerRuntime::kPodman);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.systemd_unit, "user@1000.service");
  CgroupInfo conmon = parse_cgroup("0::/machine.slice/libpod-conmon-" + kId + ".scope\n");
  EXPECT_EQ(conmon.container_id, "");
}

TEST(attribution_cgroup, SlurmV1PrefersTheJobHierarchy) {
  std::string text =
      "13:misc:/system.slice/slurmd.service\n"
      "7:freezer:/slurm/uid_1002/job_4242/step_0/task_0\n"
      "5:cpu,cpuacct:/system.slice/slurmd.service\n"
      "4:memory:/slurm/uid_1002/job_4242/step_0/task_0\n"
      "1:name=systemd:/system.slice/slurmd.service\n";
  CgroupInfo c = parse_cgroup(text);
  EXPECT_EQ(c.version, CgroupVersion::kV1);
  EXPECT_EQ(c.slurm_job, "4242");
  EXPECT_EQ(c.slurm_step, "0");
  EXPECT_EQ(c.slurm_uid, "1002");
  EXPECT_EQ(c.path, "/slurm/uid_1002/job_4242/step_0/task_0");
  EXPECT_EQ(c.container_id, "");
}

TEST(attribution_cgroup, SlurmV2) {
  CgroupInfo c = parse_cgroup("0::/system.slice/slurmstepd.scope/job_4243/step_batch/user/task_0\n");
  EXPECT_EQ(c.slurm_job, "4243");
  EXPECT_EQ(c.slurm_step, "batch");
  EXPECT_EQ(c.slurm_uid, "");
  CgroupInfo named_node = parse_cgroup("4:memory:/slurm_node07/uid_1000/job_17/step_extern/task_0\n");
  EXPECT_EQ(named_node.slurm_job, "17");
  EXPECT_EQ(named_node.slurm_step, "extern");
  // job_ folders outside a Slurm hierarchy are not Slurm jobs.
  EXPECT_EQ(parse_cgroup("0::/system.slice/cron.service/job_12\n").slurm_job, "");
}

TEST(attribution_cgroup, SystemdUnits) {
  CgroupInfo svc = parse_cgroup("0::/system.slice/jupyter.service\n");
  EXPECT_EQ(svc.systemd_unit, "jupyter.service");
  EXPECT_EQ(svc.container_id, "");
  EXPECT_EQ(parse_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n").systemd_unit, "session-3.scope");
  EXPECT_EQ(
      parse_cgroup("0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-firefox-123.scope\n").systemd_unit,
      "app-firefox-123.scope");
  EXPECT_EQ(parse_cgroup("0::/init.scope\n").systemd_unit, "init.scope");
}

TEST(attribution_cgroup, HybridLayout) {
  std::string path = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + kUidSystemd +
                     ".slice/cri-containerd-" + kId + ".scope";
  std::string text = "13:misc:/\n12:rdma:/\n4:memory:" + path + "\n1:name=systemd:" + path + "\n0::" + path + "\n";
  CgroupInfo c = parse_cgroup(text);
  EXPECT_EQ(c.version, CgroupVersion::kHybrid);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.pod_uid, kUid);
  EXPECT_EQ(c.qos, PodQos::kBestEffort);
}

TEST(attribution_cgroup, PrefersTheMostInformativeV1Path) {
  // name=systemd says only "docker.service"; the devices controller names the container.
  std::string text = "2:devices:/docker/" + kId + "\n1:name=systemd:/system.slice/docker.service\n";
  CgroupInfo c = parse_cgroup(text);
  EXPECT_EQ(c.container_id, kId);
  EXPECT_EQ(c.systemd_unit, "");
  // On a tie, name=systemd wins over other controllers.
  CgroupInfo tie = parse_cgroup("3:memory:/system.slice/a.service\n1:name=systemd:/system.slice/b.service\n");
  EXPECT_EQ(tie.systemd_unit, "b.service");
}

TEST(attribution_cgroup, RejectsLookalikes) {
  // Ids that are not 64 lowercase hex digits are not container ids.
  EXPECT_EQ(parse_cgroup("0::/system.slice/docker-1234.scope\n").container_id, "");
  EXPECT_EQ(parse_cgroup("0::/docker/" + kId.substr(0, 63) + "g\n").container_id, "");
  EXPECT_EQ(parse_cgroup("0::/system.slice/docker-1234.scope\n").systemd_unit, "docker-1234.scope");
  // A bare 64-hex folder outside docker/ or kubepods is not attributed to a runtime.
  EXPECT_EQ(parse_cgroup("0::/machine/" + kId + "\n").container_id, "");
  // "pod" folders outside kubepods are not pods.
  EXPECT_EQ(parse_cgroup("0::/system.slice/pod" + kUid + "\n").pod_uid, "");
}

TEST(attribution_cgroup, MalformedInputNeverThrows) {
  for (std::string text :
       std::vector<std::string>{"", "\n\n", "garbage", "0:", "x::/a", "0::", "0::/", "1:name=systemd:/\n0::/\n",
                                std::string(10000, '/'), "0::/kubepods.slice/kubepods-pod.slice\n"}) {
    CgroupInfo c = parse_cgroup(text);
    EXPECT_EQ(c.container_id, "") << text;
    EXPECT_EQ(c.pod_uid, "") << text;
  }
  EXPECT_EQ(parse_cgroup("").version, CgroupVersion::kUnknown);
  EXPECT_EQ(parse_cgroup("0::/\r\n").version, CgroupVersion::kV2);
}

}  // namespace
}  // namespace gpumeter
