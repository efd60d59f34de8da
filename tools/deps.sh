#!/bin/bash
# Installs every Debian package plimsoll needs to build, test and run its demo.
# Idempotent and quick when everything is there: apt is only called for what is missing.
set -euo pipefail

PACKAGES=(
  # build
  bazel-bootstrap g++ pkg-config git dpkg-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libvirt-dev prometheus-cpp-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # real-guest lab: private libvirtd, QEMU (TCG), busybox initramfs, ext4 data disk; zstd
  # unpacks bookworm-backports' kernel (the lab's backports flavour)
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86 zstd
  busybox-static kmod cpio xz-utils e2fsprogs util-linux procps
  # fuzzing and the sanitizer run (tools/fuzz.sh, tools/sanitize.sh): clang, libFuzzer and clang's sanitizer runtimes
  clang libclang-rt-14-dev
  # tests and tools
  python3 python3-grpcio python3-protobuf curl openssl prometheus
  # plimsoll-placement (placement/) and its end-to-end test against a real Placement
  python3-openstacksdk python3-keystoneauth1 placement-api
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing Debian packages: ${missing[*]}; run as root to install them" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Update the package lists first when they are empty or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
  apt-get update -q >&2
fi
# No recommends: nothing here needs them, and they pull a QEMU GUI, GTK, swtpm, LVM and
# libvirt's Xen, LXC and VirtualBox drivers onto a host that needs none of them.
APT_INSTALL=(apt-get install -y -q --no-install-recommends)
if ! "${APT_INSTALL[@]}" "${missing[@]}" >&2; then
  apt-get update -q >&2
  "${APT_INSTALL[@]}" "${missing[@]}" >&2
fi
# Debian's package starts no libvirtd here (no systemd), and we never use the system one:
# the lab runs a private libvirtd in its own mount namespace.
