#!/bin/sh
# PID 1 of the virtual device (scripts/vdevice): brings the guest up the way a device's init does
# and then serves the host's commands from the console. In the systemd flavour of the guest
# (fleetlet.init=systemd on the kernel's command line) it makes the same mounts and then hands
# over to systemd, whose units (scripts/vdevice writes them) start containerd, the images, the
# console and the agent.
#
# The root is the cached guest tree on hostfs, read-only; what a device keeps lives on its
# persistent disk (/dev/ubda, ext4) mounted at /persist and bound over /var/lib/containerd,
# /var/lib/fleetlet, /var/lib/cni, /var/log and /etc/fleetlet; /run and /tmp are tmpfs, so
# containerd's state (its running tasks, shims and mounts) is gone after every power cut.
# /shared is the host folder of this device: the fleetlet binary, the first-boot config, the
# agent's log, the command channel, and a test's hooks (pre-boot.sh, run before containerd
# starts; pre-agent.sh, run once containerd answers and before the agent starts). In the plain
# flavour, a device booted with --launcher (fleetlet.launcher=1) runs the agent under the
# launcher, /shared/fleetlet-launch, with /shared/fleetlet as the packaged executable, the way the
# package's unit does; the variables in /shared/agent.env (a test's, "NAME=value" lines) are in
# the agent's environment, read at each start.
#
# The command channel is vdevice-console.sh; the images and the pre-agent hook vdevice-images.sh.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
say() { echo "vdevice: $*" > /dev/console; }

mount -t proc proc /proc
flavour=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^fleetlet.init=//p')
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=0755,size=256m tmpfs /run
mount -t tmpfs -o mode=1777,size=256m tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t hostfs -o "$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^fleetlet.shared=//p')" hostfs /shared
stty -echo < /dev/console 2>/dev/null

# cgroup v2 only, its controllers enabled for the tree below the root (systemd does both itself).
if [ "$flavour" != systemd ]; then
  mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
  echo "+cpu +io +memory +pids" > /sys/fs/cgroup/cgroup.subtree_control
fi
modprobe overlay
modprobe bridge
modprobe veth
hostname fleetlet-vdevice
ip link set lo up

# The persistent disk: journal replayed by the mount after a power cut.
mount -t ext4 /dev/ubda /persist || say "cannot mount the persistent disk"
for d in containerd fleetlet cni log etc-fleetlet; do mkdir -p /persist/$d; done
mount --bind /persist/containerd /var/lib/containerd
mount --bind /persist/fleetlet /var/lib/fleetlet
mount --bind /persist/cni /var/lib/cni
mount --bind /persist/log /var/log
mount --bind /persist/etc-fleetlet /etc/fleetlet
mkdir -p /etc/fleetlet/manifests
# First boot: the device is provisioned with the host's config.
[ -f /etc/fleetlet/config.yaml ] || cp /shared/config.yaml /etc/fleetlet/config.yaml

# The host-only link to the host (the hub), when the device has one.
if ip link show vec0 > /dev/null 2>&1; then
  addr=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^fleetlet.addr=//p')
  echo 1 > /proc/sys/net/ipv6/conf/vec0/disable_ipv6
  ip addr add "$addr" dev vec0 && ip link set vec0 up
fi

# A test's hook, before anything of the device starts (to look at the disk as it was left).
hook() { # hook NAME: runs /shared/NAME.sh if there is one; its output is NAME.out once done
  [ -f "/shared/$1.sh" ] || return 0
  sh "/shared/$1.sh" > "/shared/$1.out.new" 2>&1
  mv "/shared/$1.out.new" "/shared/$1.out"
}
hook pre-boot

if [ "$flavour" = systemd ]; then
  # What systemd writes beside the persistent folders, on the read-only root.
  mount -t tmpfs -o mode=0755 tmpfs /var/lib/systemd
  mount -t tmpfs -o mode=1777 tmpfs /var/tmp
  exec /lib/systemd/systemd
fi

launcher=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^fleetlet.launcher=//p')
# agent: runs the agent (under the launcher with --launcher), a test's variables added.
agent() {
  if [ -f /shared/agent.env ]; then set -a; . /shared/agent.env; set +a; fi
  if [ "$launcher" = 1 ]; then
    exec /bin/sh /shared/fleetlet-launch --root-dir /var/lib/fleetlet --packaged /shared/fleetlet \
      -- agent --config /etc/fleetlet/config.yaml
  fi
  exec /shared/fleetlet agent --config /etc/fleetlet/config.yaml
}
containerd > /run/containerd.log 2>&1 &
(
  /sbin/fleetlet-vdevice-images
  # The agent, restarted if it exits (as a service manager would), logging to the host.
  n=0
  while :; do
    n=$((n + 1))
    echo "vdevice: agent start $n at $(date -u +%FT%TZ)" >> /shared/agent.log
    (agent) >> /shared/agent.log 2>&1
    echo "vdevice: agent exited with $? at $(date -u +%FT%TZ)" >> /shared/agent.log
    sleep 2
  done
) &

/sbin/fleetlet-vdevice-console
echo "vdevice: console closed" > /dev/console
exec sleep infinity
