#!/bin/sh
# The virtual device's command channel (scripts/vdevice), in both flavours of the guest: the host
# writes /shared/exec/ID.sh and then the line "ID" on the console; the script runs in the
# background, its output goes to /shared/exec/ID.out and the line "@@done ID RC" to the console.
# Returns when the console closes.
echo "vdevice: ready" > /dev/console
while read -r id; do
  case $id in '' | *[!a-z0-9-]*) continue ;; esac
  (
    sh "/shared/exec/$id.sh" > "/shared/exec/$id.out" 2>&1
    echo "@@done $id $?" > /dev/console
  ) &
done < /dev/console
