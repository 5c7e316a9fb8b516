"""Prometheus text exposition (0.0.4), parsed with the standard library only: the node the check
runs on need not have prometheus_client in the Python it runs under."""
import math
import re

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_ESCAPES = {"\\": "\\", "n": "\n", '"': '"'}


class Samples:
    """The samples of one scrape: [(name, {label: value}, value)]."""

    def __init__(self, rows):
        self.rows = rows

    def find(self, name, **labels):
        return [(ls, v) for n, ls, v in self.rows
                if n == name and all(ls.get(k, "") == want for k, want in labels.items())]

    def value(self, name, **labels):
        """The one sample's value, or None when there is none; more than one is an error."""
        found = self.find(name, **labels)
        if len(found) > 1:
            raise ValueError("%s%r: %d samples" % (name, labels, len(found)))
        return found[0][1] if found else None

    def total(self, name, **labels):
        """The sum over every sample of `name` with these labels (0 when there is none)."""
        return sum(v for _, v in self.find(name, **labels))


def parse(text):
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        rows.append(_parse_line(line))
    return Samples(rows)


def _parse_line(line):
    m = _NAME.match(line)
    if not m:
        raise ValueError("bad sample line: %r" % line)
    name, rest, labels = m.group(0), line[m.end():], {}
    if rest.startswith("{"):
        labels, rest = _parse_labels(rest[1:])
    value = rest.split()[0]
    return name, labels, _number(value)


def _parse_labels(text):
    labels, i = {}, 0
    while True:
        while text[i] in " ,":
            i += 1
        if text[i] == "}":
            return labels, text[i + 1:]
        eq = text.index("=", i)
        key = text[i:eq].strip()
        i = eq + 2  # past ="
        value = []
        while text[i] != '"':
            if text[i] == "\\":
                i += 1
                value.append(_ESCAPES.get(text[i], "\\" + text[i]))
            else:
                value.append(text[i])
            i += 1
        labels[key] = "".join(value)
        i += 1


def _number(text):
    special = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}
    return special[text] if text in special else float(text)
