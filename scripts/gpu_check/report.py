"""report.md: the verdict first, then each step's comparisons as a table, then the NVML
recording the agent wrote and the logs of every process the check started."""
import os

from .results import FAIL

INFO = [("mode", "Mode"), ("host", "Host"), ("gpu", "GPU index"), ("gpu_name", "GPU"), ("uuid", "UUID"),
        ("driver_version", "Driver"), ("gpumeter", "gpumeter"), ("scenario", "Scenario"),
        ("collect_interval_s", "Collection interval (s)"), ("quick", "Quick"), ("planted_fault", "Planted fault"),
        ("started_utc", "Started (UTC)"), ("seconds", "Took (s)")]


def write(path, results, recording, out):
    lines = header(results) + steps(results) + recording_section(recording) + logs_section(out)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def header(results):
    failures = results.failures()
    verdict = ("**FAIL**: %d comparison(s) outside their tolerance" % len(failures)) if failures else \
        "**PASS**: every comparison within its tolerance"
    lines = ["# gpumeter self-check", "", verdict, ""]
    for c in failures:
        lines.append("- step %d: %s%s" % (c.step, c.name, " (%s)" % c.note if c.note else ""))
    lines += ["", "| | |", "|---|---|"]
    for key, label in INFO:
        if results.info.get(key) is not None:
            lines.append("| %s | %s |" % (label, _cell(results.info[key])))
    return lines + [""]


def steps(results):
    lines = []
    for number, title in results.steps:
        items = results.of_step(number)
        lines += ["## Step %d: %s" % (number, title), ""]
        if not items:
            lines += ["Nothing was compared.", ""]
            continue
        lines += ["| comparison | result | measured | tolerance | note |", "|---|---|---|---|---|"]
        for c in items:
            result = "**%s**" % c.status.upper() if c.status == FAIL else c.status
            lines.append("| %s | %s | %s | %s | %s |" % (_cell(c.name), result, _measured(c.measured),
                                                        _cell(c.tolerance), _cell(c.note)))
        lines.append("")
    return lines


def _measured(m):
    return _cell(", ".join("%s: %s" % (k, _number(v)) for k, v in m.items()))


def _number(v):
    if isinstance(v, float):
        return "%.3f" % v if abs(v) >= 1e6 else "%.6g" % v  # unix times to the millisecond
    if isinstance(v, dict):
        return "{%s}" % ", ".join("%s: %s" % (k, _number(x)) for k, x in v.items())
    if isinstance(v, list):
        return "[%s]" % ", ".join(_number(x) for x in v)
    return str(v)


def _cell(v):
    return str(v).replace("|", "\\|").replace("\n", " ")


def recording_section(recording):
    lines = ["## The agent's NVML recording", ""]
    if recording is None:
        return lines + ["None was written (this gpumeter has no `--nvml.record`, or it wrote nothing).", ""]
    header = recording["header"]
    lines += ["`%s`: %d lines, %d bytes, %d calls%s%s; it ended: %s. The simulator replays it: "
              "`gpumeter serve --sim.scenario replay.yaml`. Calls by function:" % (
                  recording["path"], recording["lines"], recording["bytes"], sum(recording["calls"].values()),
                  ", anonymized" if header.get("anonymized") else "",
                  ", %d lines not JSON" % recording["unparsed_lines"] if recording["unparsed_lines"] else "",
                  recording["end"] or "without an end line (the agent stopped first)"), "",
              "| function | calls |", "|---|---|"]
    lines += ["| %s | %d |" % (fn, n) for fn, n in recording["calls"].items()]
    return lines + [""]


def logs_section(out):
    lines = ["## Logs", "", "Every process the check started logged to `logs/` (nvidia-smi's invocations to "
             "`logs/nvidia-smi.log`); the burns' own reports are in `burns/`; every figure above is in "
             "`results.json`.", ""]
    logs = sorted(os.listdir(os.path.join(out, "logs"))) if os.path.isdir(os.path.join(out, "logs")) else []
    return lines + ["- `logs/%s`" % name for name in logs] + [""]
