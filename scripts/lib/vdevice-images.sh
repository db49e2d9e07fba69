#!/bin/sh
# The virtual device's images (no registry is reachable from it), in both flavours of the guest:
# once containerd answers, each archive not imported yet goes onto the disk; then "containerd
# ready" on the console and a test's pre-agent hook (/shared/pre-agent.sh: its output is
# /shared/pre-agent.out once done), before the agent starts.
# (Not `ctr version` to wait: it fails for good once a power cut has left containerd's
# introspection uuid file empty, while everything else works.)
until ctr -n k8s.io images ls -q > /dev/null 2>&1; do sleep 0.2; done
for tar in /usr/share/fleetlet-vdevice/images/*.tar; do
  name=$(basename "$tar" .tar)
  ctr -n k8s.io images ls -q | grep -q "/$name:" && continue
  ctr -n k8s.io images import --all-platforms "$tar" > /dev/null
  # As if pulled long before: unpacked layers are not synced by containerd, and a power cut in
  # the next half minute would leave them as empty files.
  sync
done
echo "vdevice: containerd ready" > /dev/console
if [ -f /shared/pre-agent.sh ]; then
  sh /shared/pre-agent.sh > /shared/pre-agent.out.new 2>&1
  mv /shared/pre-agent.out.new /shared/pre-agent.out
fi
