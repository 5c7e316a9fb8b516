# Install rules and the Debian package (CPack). `scripts/release.sh` builds the package from the
# portable build; docs/packaging.md describes what it installs and why.
#
# The rules are written for the package, whose prefix is /usr: the binary and the simulator go
# under the prefix (bin/, lib/gpumeter/, share/), while the configuration files and the systemd
# unit go to the absolute paths Debian gives them (/etc, /lib/systemd/system), whatever the
# prefix. Every rule belongs to the component `gpumeter`, and the package holds that component
# only, so no other install() rule in the tree ends up in it by accident.

set(GPUMETER_PACKAGE_COMPONENT gpumeter)

# The binary, and the fleet simulator beside it: bin/gpumeter loads ../lib/gpumeter/libnvidia-ml.so.1
# for --sim.scenario, and runs bin/gpumeter-sim for `gpumeter sim`, in the build tree and when
# installed alike. Only the real file is installed,
# not the libnvidia-ml.so development link, which would let a program linked with -lnvidia-ml pick
# up the simulator.
install(TARGETS gpumeter gpumeter-sim RUNTIME DESTINATION bin COMPONENT ${GPUMETER_PACKAGE_COMPONENT})
install(TARGETS nvml_sim cuda_sim LIBRARY DESTINATION lib/gpumeter NAMELINK_SKIP COMPONENT ${GPUMETER_PACKAGE_COMPONENT})

# Compressed as Debian installs man pages and changelogs (-n: no name or time stamp inside, so the
# same source gives the same bytes).
function(gpumeter_gzip target source output)
  get_filename_component(dir ${output} DIRECTORY)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND sh -c "gzip -9n < \"$0\" > \"$1\"" ${source} ${output}
    DEPENDS ${source}
    COMMENT "Compressing ${source}"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS ${output})
endfunction()

set(GPUMETER_MAN_SOURCE ${CMAKE_SOURCE_DIR}/docs/gpumeter.1)
set(GPUMETER_MAN_GZ ${CMAKE_BINARY_DIR}/man/gpumeter.1.gz)
gpumeter_gzip(gpumeter_man ${GPUMETER_MAN_SOURCE} ${GPUMETER_MAN_GZ})
gpumeter_gzip(gpumeter_sim_man ${CMAKE_SOURCE_DIR}/docs/gpumeter-sim.1 ${CMAKE_BINARY_DIR}/man/gpumeter-sim.1.gz)
install(FILES ${GPUMETER_MAN_GZ} ${CMAKE_BINARY_DIR}/man/gpumeter-sim.1.gz DESTINATION share/man/man1
        COMPONENT ${GPUMETER_PACKAGE_COMPONENT})

# Configuration, all three conffiles (listed in the control file's conffiles below).
install(FILES ${CMAKE_SOURCE_DIR}/deploy/config/gpumeter.yaml
        DESTINATION /etc/gpumeter COMPONENT ${GPUMETER_PACKAGE_COMPONENT})
install(FILES ${CMAKE_SOURCE_DIR}/deploy/pricing/list-prices.yaml
        DESTINATION /etc/gpumeter RENAME pricing.yaml COMPONENT ${GPUMETER_PACKAGE_COMPONENT})
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/gpumeter.default
        DESTINATION /etc/default RENAME gpumeter COMPONENT ${GPUMETER_PACKAGE_COMPONENT})
set(GPUMETER_CONFFILES /etc/gpumeter/gpumeter.yaml /etc/gpumeter/pricing.yaml /etc/default/gpumeter)

# The systemd unit, where Debian 12 packages put units.
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/gpumeter.service
        DESTINATION /lib/systemd/system COMPONENT ${GPUMETER_PACKAGE_COMPONENT})

# Samples for the rest of the stack, read-only under share/gpumeter: the Prometheus
# configuration and rule files (their promtool tests stay in the sources), the Alertmanager
# configuration, the Grafana dashboards, the pricing files and the simulator's scenarios.
# Directories are read when the package is built; one that does not exist is left out.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/deploy/prometheus/
        DESTINATION share/gpumeter/prometheus COMPONENT ${GPUMETER_PACKAGE_COMPONENT}
        FILES_MATCHING PATTERN "*.yml" PATTERN "tests" EXCLUDE)
foreach(dir alertmanager grafana pricing scenarios)
  # Scripts among the samples (deploy/alertmanager/with-receivers.sh) stay executable.
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/deploy/${dir}/ DESTINATION share/gpumeter/${dir}
          COMPONENT ${GPUMETER_PACKAGE_COMPONENT} OPTIONAL
          PATTERN "*.sh" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                     WORLD_READ WORLD_EXECUTE)
endforeach()

# The self-check kit (docs/real-hardware.md): scripts/gpu-check.sh with its Python package and
# the benchmark's peer exporter, under share/gpumeter/gpu-check, where the script finds the
# binary (../../../bin/gpumeter) and the scenario (../scenarios) of the bundle or the package.
install(PROGRAMS ${CMAKE_SOURCE_DIR}/scripts/gpu-check.sh ${CMAKE_SOURCE_DIR}/bench/peer_exporter.py
        DESTINATION share/gpumeter/gpu-check COMPONENT ${GPUMETER_PACKAGE_COMPONENT})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/scripts/gpu_check DESTINATION share/gpumeter/gpu-check
        COMPONENT ${GPUMETER_PACKAGE_COMPONENT} USE_SOURCE_PERMISSIONS PATTERN "__pycache__" EXCLUDE)

install(FILES ${CMAKE_SOURCE_DIR}/deploy/debian/copyright
        DESTINATION share/doc/gpumeter COMPONENT ${GPUMETER_PACKAGE_COMPONENT})

# The package's changelog, whose newest entry must name the version the package is built as.
set(GPUMETER_DEBIAN_RELEASE 1)
set(GPUMETER_CHANGELOG ${CMAKE_SOURCE_DIR}/deploy/debian/changelog)
file(STRINGS ${GPUMETER_CHANGELOG} GPUMETER_CHANGELOG_TOP LIMIT_COUNT 1)
if(NOT GPUMETER_CHANGELOG_TOP MATCHES "^gpumeter \\(${PROJECT_VERSION}-${GPUMETER_DEBIAN_RELEASE}\\) ")
  message(FATAL_ERROR "deploy/debian/changelog: the newest entry is '${GPUMETER_CHANGELOG_TOP}'; "
                      "the package is gpumeter ${PROJECT_VERSION}-${GPUMETER_DEBIAN_RELEASE}: add an entry")
endif()
set(GPUMETER_CHANGELOG_GZ ${CMAKE_BINARY_DIR}/debian/changelog.Debian.gz)
gpumeter_gzip(gpumeter_changelog ${GPUMETER_CHANGELOG} ${GPUMETER_CHANGELOG_GZ})
install(FILES ${GPUMETER_CHANGELOG_GZ} DESTINATION share/doc/gpumeter COMPONENT ${GPUMETER_PACKAGE_COMPONENT})
# lintian's tags that do not apply to a package built outside the archive, each with its reason.
# The portable build adds those of its static libraries (deploy/debian/lintian-overrides.portable).
set(GPUMETER_LINTIAN_OVERRIDES ${CMAKE_BINARY_DIR}/debian/lintian-overrides)
file(READ ${CMAKE_SOURCE_DIR}/deploy/debian/lintian-overrides GPUMETER_LINTIAN_TEXT)
if(GPUMETER_PORTABLE)
  file(READ ${CMAKE_SOURCE_DIR}/deploy/debian/lintian-overrides.portable GPUMETER_LINTIAN_PORTABLE)
  string(APPEND GPUMETER_LINTIAN_TEXT "${GPUMETER_LINTIAN_PORTABLE}")
endif()
file(CONFIGURE OUTPUT ${GPUMETER_LINTIAN_OVERRIDES} CONTENT "${GPUMETER_LINTIAN_TEXT}" @ONLY)
install(FILES ${GPUMETER_LINTIAN_OVERRIDES} DESTINATION share/lintian/overrides
        RENAME gpumeter COMPONENT ${GPUMETER_PACKAGE_COMPONENT})

# --- The Debian package -----------------------------------------------------------------------
set(GPUMETER_DEBIAN_DIR ${CMAKE_BINARY_DIR}/debian)
string(REPLACE ";" "\n" GPUMETER_CONFFILES_TEXT "${GPUMETER_CONFFILES}")
file(WRITE ${GPUMETER_DEBIAN_DIR}/conffiles "${GPUMETER_CONFFILES_TEXT}\n")
# Maintainer scripts are copied so that CPack finds them with the permissions dpkg needs.
foreach(script postinst prerm postrm)
  file(COPY ${CMAKE_SOURCE_DIR}/deploy/debian/${script} DESTINATION ${GPUMETER_DEBIAN_DIR}
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};${PROJECT_NAME};${GPUMETER_PACKAGE_COMPONENT};/")
set(CPACK_PACKAGE_NAME gpumeter)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES TRUE)  # debug information stays in the build tree
set(CPACK_PACKAGE_CONTACT "gpumeter maintainers <maintainers@gpumeter.example.org>"
    CACHE STRING "Maintainer field of the Debian package (name <email>)")
set(CPACK_DEBIAN_PACKAGE_NAME gpumeter)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${GPUMETER_DEBIAN_RELEASE})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # gpumeter_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends computed by dpkg-shlibdeps from the ELF files
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus, prometheus-alertmanager")
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
set(CPACK_THREADS 0)  # xz on every core
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${GPUMETER_DEBIAN_DIR}/conffiles ${GPUMETER_DEBIAN_DIR}/postinst
    ${GPUMETER_DEBIAN_DIR}/prerm ${GPUMETER_DEBIAN_DIR}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU monitoring and chargeback agent for Prometheus")
# CPack puts the summary on the Description line and this text below it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "gpumeter serve is a node agent that can replace dcgm-exporter in place (port
9400). It loads NVIDIA NVML at run time, samples every GPU on its own
schedule, names the owner of each GPU process (user, project, Kubernetes pod,
Slurm job) and keeps an exact usage ledger that survives restarts. gpumeter
report turns that ledger into chargeback for any period from Prometheus,
VictoriaMetrics, Thanos or Mimir.
.
The package holds the binary, a hardened systemd unit (not enabled on
installation), its configuration in /etc/gpumeter, and sample Prometheus,
Alertmanager and Grafana files in /usr/share/gpumeter.
.
It also ships gpumeter's fleet simulator, a drop-in libnvidia-ml.so.1 that
plays a scenario of simulated GPUs and jobs, for demos and tests on machines
without GPUs. It lives in /usr/lib/gpumeter, off the dynamic linker's search
path, and is used only when asked for (gpumeter serve --sim.scenario).")

include(CPack)
