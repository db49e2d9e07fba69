#!/usr/bin/env bash
# Builds a one-layer OCI image layout from the static busybox of Debian's busybox-static.
# usage: build-image.sh OUT_DIR REF KIND
#   KIND busybox: /bin/busybox with every applet linked, /etc/passwd, default command "sh"
#   KIND pause:   the same rootfs, whose command sleeps until it is signalled (a sandbox image)
#   KIND busybox-v2: like busybox, with /etc/fleetlet-test-version = 2 (a second, distinct image)
#   KIND busybox-private: like busybox, with /etc/fleetlet-test-private (for the password registry)
#   KIND filler-<N>m: like busybox, plus a second layer holding /fleetlet-test/filler: N MiB of
#     incompressible (AES-CTR keystream) but reproducible bytes, so the image takes ~N MiB in the
#     registry and twice that in containerd (the layer blob and its unpacked snapshot)
set -euo pipefail
out=$1 ref=$2 kind=$3
bb=$(command -v busybox)
[ -x "$bb" ] || { echo "build-image: busybox (busybox-static) is not installed" >&2; exit 1; }
file -L "$bb" 2>/dev/null | grep -q 'statically linked' || ldd "$bb" 2>&1 | grep -q 'not a dynamic' ||
  { echo "build-image: $bb is not a static binary (install busybox-static)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root"/{bin,etc,tmp,proc,sys,dev,root,var/www,home}
chmod 1777 "$root/tmp"
cp "$bb" "$root/bin/busybox"
for applet in $("$bb" --list); do
  [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
done
cat > "$root/etc/passwd" <<'P'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/home:/bin/false
P
cat > "$root/etc/group" <<'G'
root:x:0:
nogroup:x:65534:
G
echo 'hosts: files dns' > "$root/etc/nsswitch.conf"

env='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"'
case $kind in
  busybox) cmd='["sh"]' ;;
  busybox-v2) cmd='["sh"]'; echo 2 > "$root/etc/fleetlet-test-version" ;;
  busybox-private) cmd='["sh"]'; echo private > "$root/etc/fleetlet-test-private" ;;
  filler-*m)
    cmd='["sh"]'
    filler_mib=${kind#filler-}
    filler_mib=${filler_mib%m}
    [[ $filler_mib =~ ^[1-9][0-9]*$ ]] || { echo "build-image: bad filler size in $kind" >&2; exit 1; }
    command -v openssl >/dev/null || { echo "build-image: openssl is needed for $kind" >&2; exit 1; }
    ;;
  pause)
    cat > "$root/bin/sandbox-sleep" <<'S'
#!/bin/sh
trap 'exit 0' TERM INT
while :; do sleep 3600 & wait $!; done
S
    chmod 755 "$root/bin/sandbox-sleep"
    cmd='["/bin/sandbox-sleep"]' ;;
  *) echo "build-image: unknown kind $kind" >&2; exit 1 ;;
esac

# layer DIR NAME: a reproducible layer (fixed mtimes and owners, sorted entries) from DIR, as
# blobs/sha256/<digest> in $work/blobs; sets layer_diff_id, layer_digest and layer_size.
mkdir -p "$work/blobs"
layer() {
  local dir=$1 name=$2 level=$3
  tar --sort=name --mtime='2024-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner \
    -C "$dir" -cf "$work/$name.tar" .
  layer_diff_id=$(sha256sum "$work/$name.tar" | cut -d' ' -f1)
  gzip -n "-$level" -c "$work/$name.tar" > "$work/$name.tar.gz"
  rm -f "$work/$name.tar"
  layer_digest=$(sha256sum "$work/$name.tar.gz" | cut -d' ' -f1)
  layer_size=$(stat -c %s "$work/$name.tar.gz")
  mv "$work/$name.tar.gz" "$work/blobs/$layer_digest"
}

layer "$root" base 9
diff_ids="\"sha256:$layer_diff_id\""
layers=$(printf '{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}' "$layer_digest" "$layer_size")
if [ -n "${filler_mib:-}" ]; then
  mkdir -p "$work/filler/fleetlet-test"
  # A fixed key and iv: the same size always gives the same bytes (and the same digests). head
  # closes the pipe when it has enough, which ends openssl with SIGPIPE.
  { openssl enc -aes-128-ctr -nosalt -K 666c6565746c65742d66696c6c657221 \
    -iv 00000000000000000000000000000000 -in /dev/zero 2>/dev/null || true; } |
    head -c "$((filler_mib * 1024 * 1024))" > "$work/filler/fleetlet-test/filler"
  layer "$work/filler" filler 1
  diff_ids="$diff_ids,\"sha256:$layer_diff_id\""
  layers="$layers,$(printf '{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}' "$layer_digest" "$layer_size")"
fi

rm -rf "$out"
mkdir -p "$out/blobs"
mv "$work/blobs" "$out/blobs/sha256"
printf '{"architecture":"amd64","os":"linux","created":"2024-01-01T00:00:00Z","config":{"Env":[%s],"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":[%s]},"history":[{"created":"2024-01-01T00:00:00Z","created_by":"fleetlet scripts/lib/build-image.sh %s"}]}' \
  "$env" "$cmd" "$diff_ids" "$kind" > "$work/config.json"
config_digest=$(sha256sum "$work/config.json" | cut -d' ' -f1)
config_size=$(stat -c %s "$work/config.json")
mv "$work/config.json" "$out/blobs/sha256/$config_digest"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[%s]}' \
  "$config_digest" "$config_size" "$layers" > "$work/manifest.json"
manifest_digest=$(sha256sum "$work/manifest.json" | cut -d' ' -f1)
manifest_size=$(stat -c %s "$work/manifest.json")
mv "$work/manifest.json" "$out/blobs/sha256/$manifest_digest"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest_digest" "$manifest_size" "$ref" > "$out/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' > "$out/oci-layout"
