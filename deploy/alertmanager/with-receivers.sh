#!/bin/sh
# Prints alertmanager.yml with its receivers replaced by those of a receivers file, so that the
# routing tree, grouping and inhibition stay in one place whatever the channel:
#
#   deploy/alertmanager/with-receivers.sh deploy/alertmanager/receivers/slack.yml \
#     > /etc/prometheus/alertmanager.yml
#   cp deploy/alertmanager/templates/gpumeter.tmpl /etc/prometheus/alertmanager_templates/
#   amtool check-config /etc/prometheus/alertmanager.yml
#
# Usage: with-receivers.sh RECEIVERS_FILE [BASE_CONFIG]
#   RECEIVERS_FILE  a YAML file with the top-level keys `receivers:` (the four receivers the routes
#                   name: gpu-pager, gpu-chat, gpu-info, finance-budget) and optionally
#                   `templates:`; receivers/*.yml are examples (discord, slack, wechat, email)
#   BASE_CONFIG     the configuration whose routes to keep; alertmanager.yml beside this script
#                   by default. Its `receivers:` must be its last top-level key.
# The output is the base up to its `receivers:` line, then the receivers file. Placeholders left
# in it (REPLACE_WITH_...) are counted on stderr. Needs only sh and awk.
set -eu

usage() { echo "usage: $0 RECEIVERS_FILE [BASE_CONFIG]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
receivers=$1
base=${2:-$(dirname "$0")/alertmanager.yml}
for f in "$receivers" "$base"; do
  [ -r "$f" ] || { echo "$0: cannot read $f" >&2; exit 2; }
done

# Top-level keys: lines that start with a letter and hold a colon.
keys() { awk '/^[A-Za-z_][A-Za-z0-9_]*:/ { sub(/:.*/, ""); print }' "$1"; }

base_keys=$(keys "$base")
last=$(printf '%s\n' "$base_keys" | tail -n 1)
if [ "$last" != receivers ] || [ "$(printf '%s\n' "$base_keys" | grep -c '^receivers$')" != 1 ]; then
  echo "$0: $base must have one top-level receivers: section, its last" >&2; exit 1
fi
if printf '%s\n' "$base_keys" | grep -q '^templates$'; then
  echo "$0: $base already has templates:; move them to $receivers" >&2; exit 1
fi
other=$(keys "$receivers" | grep -v -e '^receivers$' -e '^templates$' || true)
if [ -n "$other" ]; then
  echo "$0: $receivers may hold only receivers: and templates:, not: $(echo $other)" >&2; exit 1
fi
if ! keys "$receivers" | grep -q '^receivers$'; then
  echo "$0: $receivers has no receivers: section" >&2; exit 1
fi

awk '/^receivers:/ { exit } { print }' "$base"
printf '# The receivers below come from %s (with-receivers.sh).\n' "$(basename "$receivers")"
cat "$receivers"

left=$(grep -c 'REPLACE_WITH_' "$receivers" || true)
if [ "$left" -gt 0 ]; then
  echo "$0: $left line(s) of $(basename "$receivers") still hold a REPLACE_WITH_ placeholder: fill them in" >&2
fi
