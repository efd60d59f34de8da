#!/usr/bin/python3
"""plimsoll real-guest lab: a private libvirtd with small TCG guests.

The end-to-end tests and the demo use this module to boot real KVM/QEMU guests whose
memory balloons plimsolld can move. It follows /work/shared/docs/real-guests.md:

* libvirtd runs as root in its own mount namespace (``unshare -m``) with private
  copies of /etc/passwd, /etc/group (plus a ``libvirt-qemu`` account) and private
  directories over /etc/libvirt, /run/libvirt, /var/lib/libvirt, /var/log/libvirt and
  /var/cache/libvirt. Nothing on the host is modified: where one of those folders does
  not exist on the host, its parent is overlaid (overlayfs) inside the namespace only.
  The namespace disappears with the daemon.
* Guests boot the ELF ``vmlinux`` of the Debian 12 kernel (PVH), with a busybox
  initramfs whose /init mounts the host root read-only over virtio-9p, a shared
  read-only ext4 data disk, prints a heartbeat line every 2 s on the serial console
  (a file in the state dir) and runs a workload in a chroot of the host root.
* Built artefacts (kernel, initramfs, data disk, libvirt's QEMU capability cache) live
  in a cache dir that outlives labs.

Python 3 standard library only; needs root. Library use::

    with Lab() as lab:
        lab.start()
        lab.add_guest("g1", workload="stream")
        lab.wait_ready("g1")
        print(lab.heartbeat("g1"), lab.dommemstat("g1"))

CLI: ``lab.py prepare | up | down | status`` (see ``lab.py -h``).
"""

import argparse
import atexit
import contextlib
import fcntl
import gzip
import hashlib
import json
import lzma
import os
import re
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.realpath(__file__))
REPO_ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
DEFAULT_CACHE_DIR = "/tmp/plimsoll-lab-cache"
DEFAULT_WORKLOAD_BIN = os.path.join(REPO_ROOT, "bazel-bin", "tests", "lab", "guest_workload")

WORKLOADS = ("idle", "stream", "hot", "anon")
# What a guest runs on: its kernel and the QEMU that runs it, both from Debian packages.
#   stable:    Debian 12's kernel (6.1) on the host's QEMU (7.2): what bookworm hosts run.
#   backports: bookworm-backports' kernel (6.12) on its QEMU (10.0), unpacked into the cache and
#              run beside the host's; the host's libvirt stays. The balloon's stats queue carries
#              the guest's OOM kills, allocation stalls and scan/reclaim counts from 6.12 on
#              (QEMU >= 9.2 exposes them).
# Production hosts run both, so one lab can hold guests of both flavours (add_guest(flavour=)).
# PLIMSOLL_LAB_FLAVOUR sets the lab's default.
FLAVOURS = ("stable", "backports")
BACKPORTS_SUITE = "bookworm-backports"
BACKPORTS_QEMU_PACKAGES = ("qemu-system-x86", "qemu-system-common", "qemu-system-data")
# Modules the guest needs, in load order; their dependencies are resolved with
# `modprobe --show-depends`. The serial console is built in (8250); virtio_console is for the
# virtio-serial ports (the agent's channel, /sys/class/virtio-ports).
GUEST_MODULES = ("virtio_pci", "virtio_balloon", "virtio_blk", "virtio_net", "virtio_console",
                 "9p", "9pnet_virtio", "ext4")
# The guest's vsock transport. Not in GUEST_MODULES: adding a module rebuilds the shared kernel
# artefacts and initramfs (and prunes the old ones, which other labs on the machine may be using),
# and no machine the lab has run on has /dev/vhost-vsock yet.
VSOCK_GUEST_MODULE = "vmw_vsock_virtio_transport"


def guest_has_vsock():
    """True when lab guests load the vsock transport (VSOCK_GUEST_MODULE in GUEST_MODULES)."""
    return VSOCK_GUEST_MODULE in GUEST_MODULES


# The virtio-serial port plimsoll-agent opens by default (agent/dial.h kDefaultServer).
AGENT_CHANNEL_NAME = "org.plimsoll.agent.0"
# Paths inside the guest's chroot (= host root as the guest sees it).
GUEST_DATA_DIR = "/mnt/data"
STREAM_FILE = "stream.bin"
HOT_FILE = "hot.bin"
HEARTBEAT_KEYS = ("uptime", "memtotal_kb", "memfree_kb", "memavail_kb", "cached_kb",
                  "active_file_kb", "inactive_file_kb", "anon_kb", "oom_kill",
                  "balloon_inflate", "balloon_deflate", "workingset_refault_file",
                  "pgmajfault")
STATE_MARKER = ".plimsoll-lab"
ENV_MARKER = "PLIMSOLL_LAB_STATE"
DATA_FORMAT_VERSION = 1
# Bump when the guest /init or the way the initramfs is packed changes.
INITRAMFS_FORMAT_VERSION = 2  # 2: virtio_console
# QEMU's TCG translation cache counts in its RSS and grows towards its size (1 GiB by default)
# as the guest runs new code. Capped, it stays a small constant beside guest memory, as QEMU's
# overhead is under KVM (tests/lab/README.md, "What a guest looks like").
TCG_TB_CACHE_MIB = 128
SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; libvirtd adds "-admin-sock".

_VERBOSE = os.environ.get("PLIMSOLL_LAB_VERBOSE", "1") != "0"


class LabError(RuntimeError):
    """Anything that stops the lab from doing what was asked; the message says why."""


def log(msg):
    if _VERBOSE:
        sys.stderr.write("[lab %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
        sys.stderr.flush()


def _run(cmd, check=True, timeout=120, cwd=None, input_text=None):
    """Runs cmd, returns stdout (text). Raises LabError with stderr on failure."""
    try:
        p = subprocess.run(cmd, cwd=cwd, input=input_text, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
    except FileNotFoundError as e:
        raise LabError("command not found: %s (%s)" % (cmd[0], e)) from None
    except subprocess.TimeoutExpired:
        raise LabError("timed out after %ss: %s" % (timeout, " ".join(cmd))) from None
    if check and p.returncode != 0:
        raise LabError("%s failed (rc=%d): %s" % (" ".join(cmd), p.returncode,
                                                  (p.stderr or p.stdout).strip()[-2000:]))
    return p.stdout


def _file_id(path):
    """Cheap identity of a file for cache keys: path, size, mtime."""
    st = os.stat(path)
    return "%s:%d:%d" % (path, st.st_size, st.st_mtime_ns)


def _atomic_write(path, data, mode=0o644):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


@contextlib.contextmanager
def _flock(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _supports_o_direct(path):
    """cache='none' needs O_DIRECT (tmpfs, for one, lacks it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        log("%s: no O_DIRECT on this filesystem; data disk uses cache='writeback'" % path)
        return False
    os.close(fd)
    return True


def kvm_usable():
    """True only where KVM can really run a stock guest kernel (see real-guests.md).

    PLIMSOLL_LAB_ACCEL=kvm|tcg overrides the detection.
    """
    forced = os.environ.get("PLIMSOLL_LAB_ACCEL", "").lower()
    if forced in ("kvm", "tcg", "qemu"):
        return forced == "kvm"
    if not os.path.exists("/dev/kvm") or os.path.exists("/sys/module/kvm_pvm"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return re.search(r"\b(vmx|svm)\b", flags) is not None


def preflight_problem():
    """A sentence saying why real guests cannot run here, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (private libvirtd in a mount namespace)"
    for tool in ("qemu-system-x86_64", "libvirtd", "virsh", "unshare", "busybox",
                 "mkfs.ext4", "dpkg-deb", "depmod", "modprobe", "apt-get"):
        if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
            return "%s is not installed" % tool
    return None


def _which(tool):
    return shutil.which(tool) or ("/usr/sbin/" + tool)


# --------------------------------------------------------------------------------------
# Cached artefacts: kernel, initramfs, data disk, QEMU capability cache
# --------------------------------------------------------------------------------------

GUEST_INIT = r"""#!/bin/sh
# /init of a plimsoll lab guest. Generated by tests/lab/lab.py; runs under busybox ash.
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
exec </dev/console >/dev/console 2>&1
say() { echo "PLIMSOLL-INIT $*"; }

# Load the drivers (dependency order precomputed on the host; failures such as
# crc32c-intel on a CPU model without SSE4.2 are expected and harmless).
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done < /etc/modules.order
# Kernel messages would interleave with the heartbeat lines the harness parses.
dmesg -n 1

WORKLOAD=idle; ANON_MIB=256; ANON_AFTER=0; RUN=; WL=; NAME=guest
for x in $(cat /proc/cmdline); do
  case "$x" in
    plimsoll.workload=*) WORKLOAD="${x#*=}" ;;
    plimsoll.anon_mib=*) ANON_MIB="${x#*=}" ;;
    plimsoll.anon_after=*) ANON_AFTER="${x#*=}" ;;
    plimsoll.run=*) RUN="${x#*=}" ;;
    plimsoll.wl=*) WL="${x#*=}" ;;
    plimsoll.name=*) NAME="${x#*=}" ;;
  esac
done
hostname "$NAME"

# The host root, read-only, as the chroot the workload and the agent run in.
H=/mnt/host
mkdir -p $H
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot $H || say error=mount_hostroot
mount -t proc proc $H/proc
mount -t sysfs sysfs $H/sys
mount -o bind /dev $H/dev
mount -t tmpfs -o mode=0755 tmpfs $H/run
mount -t tmpfs -o mode=1777 tmpfs $H/var/tmp
mount -t tmpfs -o mode=0755 tmpfs $H/mnt
mkdir -p $H/mnt/data
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
mount -t ext4 -o ro /dev/vda $H/mnt/data || say error=mount_data

ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2

in_chroot() {
  chroot $H /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root TMPDIR=/var/tmp PLIMSOLL_GUEST="$NAME" "$@" </dev/null >/dev/console 2>&1 &
}
need_wl() { [ -n "$WL" ] || { say error=no_workload_binary workload=$WORKLOAD; return 1; }; }
case "$WORKLOAD" in
  idle) [ -n "$WL" ] && in_chroot "$WL" idle ;;
  stream) need_wl && in_chroot "$WL" stream /mnt/data/stream.bin ;;
  hot) need_wl && in_chroot "$WL" hot /mnt/data/hot.bin ;;
  anon) need_wl && in_chroot "$WL" anon --mib "$ANON_MIB" --after "$ANON_AFTER" ;;
  *) say error=unknown_workload workload=$WORKLOAD ;;
esac
[ -n "$RUN" ] && in_chroot "$RUN"
say ready name=$NAME workload=$WORKLOAD

# Heartbeat: one line, one write, every 2 s. -1 marks a counter the kernel lacks.
PSI_FILE=/proc/pressure/memory
[ -r $PSI_FILE ] || PSI_FILE=
while :; do
  awk -v up="$(cut -d' ' -f1 /proc/uptime)" '
    FILENAME ~ /pressure/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); a["psi_" $1 "_" kv[1]] = kv[2] } next }
    { k = $1; sub(/:$/, "", k); a[k] = $2 }
    function g(k) { return (k in a) ? a[k] : -1 }
    END {
      printf "PLIMSOLL-HB uptime=%s memtotal_kb=%s memfree_kb=%s memavail_kb=%s cached_kb=%s active_file_kb=%s inactive_file_kb=%s anon_kb=%s oom_kill=%s balloon_inflate=%s balloon_deflate=%s workingset_refault_file=%s pgmajfault=%s psi_some_avg10=%s psi_some_total_us=%s psi_full_avg10=%s\n", up, g("MemTotal"), g("MemFree"), g("MemAvailable"), g("Cached"), g("Active(file)"), g("Inactive(file)"), g("AnonPages"), g("oom_kill"), g("balloon_inflate"), g("balloon_deflate"), g("workingset_refault_file"), g("pgmajfault"), g("psi_some_avg10"), g("psi_some_total"), g("psi_full_avg10")
    }' /proc/meminfo /proc/vmstat $PSI_FILE
  sleep 2
done
"""


def _newc_entry(name, mode, data=b"", ino=1, rdev=(0, 0)):
    name_b = name.encode() + b"\0"
    hdr = "070701" + "".join("%08X" % v for v in (
        ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_b), 0))
    out = hdr.encode() + name_b
    out += b"\0" * ((4 - len(out) % 4) % 4)
    out += data
    out += b"\0" * ((4 - len(data) % 4) % 4)
    return out


def _build_cpio(entries):
    """entries: list of (name, mode, data, rdev). Returns a newc archive (bytes)."""
    parts = []
    for i, (name, mode, data, rdev) in enumerate(entries, start=1):
        parts.append(_newc_entry(name, mode, data, ino=i, rdev=rdev))
    parts.append(_newc_entry("TRAILER!!!", 0, ino=0))
    return b"".join(parts)


def _unzstd_prefix(data):
    """The first zstd frame of data, decompressed (the zstd tool; Python has no zstd).

    A bzImage's payload is followed by other bytes, which zstd reports as an error after it
    has written the frame: what matters is what it wrote."""
    try:
        p = subprocess.run(["zstd", "-dc", "-q"], input=data, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=120)
    except FileNotFoundError:
        raise LabError("this kernel is zstd-compressed and the zstd tool is not installed "
                       "(apt-get install zstd)") from None
    return p.stdout


def _extract_vmlinux(vmlinuz_path, out_path):
    """The ELF vmlinux inside a bzImage (PVH boot needs the ELF).

    Debian 12's kernel packs it with xz, bookworm-backports' 6.12 with zstd."""
    with open(vmlinuz_path, "rb") as f:
        blob = f.read()
    for magic, unpack in ((b"\xfd7zXZ\x00", _unxz_prefix), (b"\x28\xb5\x2f\xfd", _unzstd_prefix)):
        pos = blob.find(magic)
        while pos >= 0:
            out = unpack(blob[pos:])
            if out[:4] == b"\x7fELF":
                _atomic_write(out_path, out)
                return
            pos = blob.find(magic, pos + 1)
    raise LabError("no xz- or zstd-compressed ELF found in %s" % vmlinuz_path)


def _unxz_prefix(data):
    try:
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data)
    except lzma.LZMAError:
        return b""


class Artefacts:
    """Builds and caches the guest kernel, initramfs and data disk under cache_dir.

    Every artefact's file name carries a hash of its inputs, so a change of input
    (newer Debian kernel, different /init, other file sizes) builds a new one and
    unchanged inputs cost a few stat() calls. Concurrent labs serialise on a lock file.
    """

    def __init__(self, cache_dir, stream_mib=700, hot_mib=128, flavour="stable"):
        if flavour not in FLAVOURS:
            raise LabError("unknown lab flavour %r (one of %s)" % (flavour, ", ".join(FLAVOURS)))
        self.cache_dir = os.path.realpath(cache_dir)
        self.stream_mib = int(stream_mib)
        self.hot_mib = int(hot_mib)
        self.flavour = flavour
        self.vmlinux = None
        self.initramfs = None
        self.data_img = None
        self.kernel_release = None
        self.qemu = None

    # Cache entries of the backports flavour carry a prefix, so that each flavour prunes only
    # its own stale entries and both can live in one cache.
    @property
    def _prefix(self):
        return "" if self.flavour == "stable" else "bpo-"

    # ---- apt ---------------------------------------------------------------------
    # The backports flavour reads bookworm-backports through a private apt configuration in
    # the cache (sources, lists, archives): the host's apt sources are left as they are.
    def _apt_dir(self):
        return os.path.join(self.cache_dir, "apt-backports")

    def _apt_options(self):
        if self.flavour == "stable":
            return []
        d = self._apt_dir()
        return ["-o", "Dir::Etc::sourcelist=" + os.path.join(d, "sources.list"),
                "-o", "Dir::Etc::sourceparts=" + os.path.join(d, "sources.list.d"),
                "-o", "Dir::State::Lists=" + os.path.join(d, "lists"),
                "-o", "Dir::Cache=" + os.path.join(d, "cache"),
                "-o", "APT::Default-Release=" + BACKPORTS_SUITE]

    def _apt_lists_key(self):
        lists = "/var/lib/apt/lists" if self.flavour == "stable" else os.path.join(
            self._apt_dir(), "lists")
        try:
            return "%d" % os.stat(lists).st_mtime_ns
        except OSError:
            return None

    def _apt_update(self):
        if self.flavour == "stable":
            _run(["apt-get", "update", "-q"], timeout=600)
            return
        d = self._apt_dir()
        for sub in ("sources.list.d", "lists/partial", "cache/archives/partial"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        _atomic_write(os.path.join(d, "sources.list"), "deb %s %s main\n" % (
            _debian_mirror(), BACKPORTS_SUITE))
        log("apt-get update of %s (private lists in %s)" % (BACKPORTS_SUITE, d))
        _run(["apt-get", "update", "-q"] + self._apt_options(), timeout=600)

    def _apt(self, tool, *args, timeout=60):
        if self.flavour != "stable":
            lists = os.path.join(self._apt_dir(), "lists")
            if not os.path.isdir(lists) or not any("Packages" in f for f in os.listdir(lists)):
                self._apt_update()  # never updated, or the last update failed
        return _run([tool] + self._apt_options() + list(args), timeout=timeout)

    # ---- kernel ------------------------------------------------------------------
    def _kernel_package(self):
        """(package, version) of the Debian 12 kernel linux-image-amd64 points to.

        apt-cache costs ~1 s, so the answer is memoised against the apt lists' mtime
        (which changes with every `apt-get update`)."""
        memo = os.path.join(self.cache_dir, self._prefix + "apt-kernel.json")
        lists_key = self._apt_lists_key()
        try:
            with open(memo) as f:
                m = json.load(f)
            if lists_key and m.get("lists") == lists_key:
                return m["package"], m["version"]
        except (OSError, ValueError, KeyError):
            pass
        pkg, ver = self._kernel_package_uncached()
        if lists_key:
            _atomic_write(memo, json.dumps({"lists": lists_key, "package": pkg,
                                            "version": ver}) + "\n")
        return pkg, ver

    def _kernel_package_uncached(self):
        try:
            out = self._apt("apt-cache", "depends", "linux-image-amd64")
            m = re.search(r"Depends:\s*(linux-image-[0-9]\S*)", out)
            if not m:
                raise LabError("apt-cache depends linux-image-amd64 names no kernel:\n" + out)
            pkg = m.group(1)
            ver = self._candidate(pkg)
            self._check_backport(pkg, ver)
            return pkg, ver
        except LabError:
            cached = sorted(d for d in os.listdir(self.cache_dir)
                            if d.startswith(self._prefix + "kernel-")
                            and os.path.isdir(os.path.join(self.cache_dir, d)))
            if cached:
                with open(os.path.join(self.cache_dir, cached[-1], "kernel.json")) as f:
                    meta = json.load(f)
                return meta["package"], meta["version"]
            raise

    def _check_backport(self, pkg, ver):
        """The backports flavour must really get backports' packages, not the host's."""
        if self.flavour != "stable" and "bpo" not in ver:
            raise LabError("%s %r is not from %s (check the private apt lists in %s)"
                           % (pkg, ver, BACKPORTS_SUITE, self._apt_dir()))

    def _candidate(self, pkg):
        pol = self._apt("apt-cache", "policy", pkg)
        m = re.search(r"Candidate:\s*(\S+)", pol)
        return m.group(1) if m and m.group(1) != "(none)" else ""

    def _download_deb(self, pkg, ver, dest):
        spec = "%s=%s" % (pkg, ver) if ver else pkg
        os.chmod(dest, 0o777)  # lets apt's _apt user write there (no sandbox warning)
        before = set(os.listdir(dest))
        cmd = ["apt-get", "download", "-q"] + self._apt_options() + [spec]
        try:
            _run(cmd, cwd=dest, timeout=600)
        except LabError as first:
            log("apt-get download failed (%s); running apt-get update" % str(first)[:200])
            self._apt_update()
            _run(cmd, cwd=dest, timeout=600)
        debs = [f for f in set(os.listdir(dest)) - before if f.endswith(".deb")]
        if len(debs) != 1:
            raise LabError("apt-get download left %r in %s" % (debs, dest))
        return os.path.join(dest, debs[0])

    def _ensure_kernel(self):
        pkg, ver = self._kernel_package()
        key = hashlib.sha256(repr((pkg, ver, GUEST_MODULES)).encode()).hexdigest()[:12]
        kdir = os.path.join(self.cache_dir, "%skernel-%s-%s" % (
            self._prefix, pkg[len("linux-image-"):], key))
        meta_path = os.path.join(kdir, "kernel.json")
        if not os.path.exists(meta_path):
            t0 = time.monotonic()
            log("building kernel artefacts for %s %s" % (pkg, ver))
            tmp = tempfile.mkdtemp(prefix="tmp-kernel-", dir=self.cache_dir)
            try:
                deb = self._download_deb(pkg, ver, tmp)
                root = os.path.join(tmp, "root")
                _run(["dpkg-deb", "-x", deb, root], timeout=600)
                releases = os.listdir(os.path.join(root, "lib", "modules"))
                if len(releases) != 1:
                    raise LabError("unexpected module trees in %s: %r" % (deb, releases))
                release = releases[0]
                _run([_which("depmod"), "-b", root, release])
                out = os.path.join(tmp, "out")
                os.makedirs(os.path.join(out, "modules"))
                _extract_vmlinux(os.path.join(root, "boot", "vmlinuz-" + release),
                                 os.path.join(out, "vmlinux"))
                order = []
                for mod in GUEST_MODULES:
                    dep = _run([_which("modprobe"), "-d", root, "-S", release,
                                "--show-depends", mod])
                    for line in dep.splitlines():
                        parts = line.split()
                        if len(parts) >= 2 and parts[0] == "insmod":
                            order.append(parts[1])
                seen = set()
                names = []
                for path in order:
                    base = os.path.basename(path)
                    if base in seen:
                        continue
                    seen.add(base)
                    if base.endswith(".xz"):
                        with open(path, "rb") as f:
                            data = lzma.decompress(f.read())
                        base = base[:-3]
                        _atomic_write(os.path.join(out, "modules", base), data)
                    else:
                        shutil.copyfile(path, os.path.join(out, "modules", base))
                    names.append(base)
                shutil.copyfile(os.path.join(root, "boot", "config-" + release),
                                os.path.join(out, "config"))
                with open(os.path.join(out, "kernel.json"), "w") as f:
                    json.dump({"package": pkg, "version": ver, "release": release,
                               "modules": names}, f, indent=1)
                if os.path.exists(kdir):
                    shutil.rmtree(kdir)
                os.rename(out, kdir)
                log("kernel artefacts ready in %.1fs" % (time.monotonic() - t0))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            self._prune(self._prefix + "kernel-", keep=os.path.basename(kdir))
        with open(meta_path) as f:
            meta = json.load(f)
        self.kernel_release = meta["release"]
        self.vmlinux = os.path.join(kdir, "vmlinux")
        return kdir, meta

    # ---- initramfs ---------------------------------------------------------------
    def _ensure_initramfs(self, kdir, meta):
        busybox = "/bin/busybox"
        key = hashlib.sha256(repr((INITRAMFS_FORMAT_VERSION, os.path.basename(kdir),
                                   GUEST_INIT, _file_id(busybox))).encode()).hexdigest()[:12]
        path = os.path.join(self.cache_dir, "%sinitramfs-%s.cpio.gz" % (self._prefix, key))
        if not os.path.exists(path):
            t0 = time.monotonic()
            with open(busybox, "rb") as f:
                bb = f.read()
            d, r, x = stat.S_IFDIR | 0o755, stat.S_IFREG, stat.S_IFREG | 0o755
            entries = [(p, d, b"", (0, 0)) for p in (
                "bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "etc",
                "lib", "lib/modules", "mnt", "tmp", "root", "run")]
            entries += [
                ("dev/console", stat.S_IFCHR | 0o600, b"", (5, 1)),
                ("dev/null", stat.S_IFCHR | 0o666, b"", (1, 3)),
                ("bin/busybox", x, bb, (0, 0)),
                ("bin/sh", stat.S_IFLNK | 0o777, b"busybox", (0, 0)),
                ("init", x, GUEST_INIT.encode(), (0, 0)),
                ("etc/modules.order", r | 0o644, ("\n".join(meta["modules"]) + "\n").encode(),
                 (0, 0)),
            ]
            for name in meta["modules"]:
                with open(os.path.join(kdir, "modules", name), "rb") as f:
                    entries.append(("lib/modules/" + name, r | 0o644, f.read(), (0, 0)))
            blob = gzip.compress(_build_cpio(entries), compresslevel=1, mtime=0)
            _atomic_write(path, blob)
            log("initramfs built (%d KiB) in %.1fs" % (len(blob) // 1024,
                                                       time.monotonic() - t0))
            self._prune(self._prefix + "initramfs-", keep=os.path.basename(path))
        self.initramfs = path

    # ---- data disk ---------------------------------------------------------------
    def _ensure_data(self):
        name = "data-v%d-s%d-h%d.img" % (DATA_FORMAT_VERSION, self.stream_mib, self.hot_mib)
        path = os.path.join(self.cache_dir, name)
        if not os.path.exists(path):
            t0 = time.monotonic()
            stage = tempfile.mkdtemp(prefix="tmp-data-", dir=self.cache_dir)
            try:
                files = os.path.join(stage, "files")
                os.mkdir(files)
                for fname, mib in ((STREAM_FILE, self.stream_mib), (HOT_FILE, self.hot_mib)):
                    with open(os.path.join(files, fname), "wb") as f:
                        chunk = 8
                        left = mib
                        while left > 0:
                            n = min(chunk, left)
                            f.write(os.urandom(n << 20))  # incompressible, no two pages alike
                            left -= n
                size_mib = self.stream_mib + self.hot_mib
                size_mib += size_mib // 20 + 32
                img = os.path.join(stage, "data.img")
                with open(img, "wb") as f:
                    f.truncate(size_mib << 20)
                _run([_which("mkfs.ext4"), "-q", "-F", "-m", "0", "-O", "^has_journal",
                      "-L", "plimsoll-data", "-E", "root_owner=0:0", "-d", files, img],
                     timeout=600)
                os.chmod(img, 0o644)
                os.rename(img, path)
            finally:
                shutil.rmtree(stage, ignore_errors=True)
            log("data disk %s built in %.1fs" % (name, time.monotonic() - t0))
        self.data_img = path

    def _prune(self, prefix, keep):
        for entry in os.listdir(self.cache_dir):
            if entry.startswith(prefix) and entry != keep:
                p = os.path.join(self.cache_dir, entry)
                log("removing stale cache entry %s" % p)
                if os.path.isdir(p):
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(p)

    # ---- QEMU --------------------------------------------------------------------
    def _ensure_qemu(self):
        """The emulator: the host's for stable; backports' QEMU unpacked into the cache.

        Debian's QEMU looks for its data and modules at fixed paths (/usr/share/qemu,
        /usr/lib/x86_64-linux-gnu/qemu), where the host's QEMU keeps its own: a module of
        another build makes QEMU abort when libvirt probes it. So the emulator libvirt runs is
        a wrapper that gives the unpacked QEMU a mount namespace of its own with its data and
        modules bound over those paths (SeaBIOS and iPXE come from the host's packages, as an
        installed QEMU takes them). Its shared libraries are bookworm's."""
        if self.flavour == "stable":
            self.qemu = os.path.realpath(_which("qemu-system-x86_64"))
            return
        ver = self._candidate(BACKPORTS_QEMU_PACKAGES[0])
        self._check_backport(BACKPORTS_QEMU_PACKAGES[0], ver)
        key = hashlib.sha256(repr((ver, BACKPORTS_QEMU_PACKAGES)).encode()).hexdigest()[:12]
        qdir = os.path.join(self.cache_dir, "bpo-qemu-%s" % key)
        wrapper = os.path.join(qdir, "plimsoll-qemu-system-x86_64")
        if not os.path.exists(os.path.join(qdir, "qemu.json")):
            t0 = time.monotonic()
            log("unpacking QEMU %s from %s" % (ver, BACKPORTS_SUITE))
            tmp = tempfile.mkdtemp(prefix="tmp-qemu-", dir=self.cache_dir)
            try:
                root = os.path.join(tmp, "root")
                for pkg in BACKPORTS_QEMU_PACKAGES:
                    deb = self._download_deb(pkg, ver, tmp)
                    _run(["dpkg-deb", "-x", deb, root], timeout=600)
                    os.unlink(deb)
                binds = []
                for path in ("/usr/share/qemu", "/usr/lib/x86_64-linux-gnu/qemu"):
                    os.makedirs(root + path, exist_ok=True)
                    if os.path.isdir(path):  # where the host has none, nothing hides ours
                        binds.append('mount --bind "$0%s" %s && ' % (path, path))
                _atomic_write(os.path.join(root, os.path.basename(wrapper)), (
                    "#!/bin/sh\n# Generated by tests/lab/lab.py: %s's QEMU with its own data and "
                    "modules.\nexec unshare -m --propagation private /bin/sh -c '%sexec "
                    "\"$0/usr/bin/qemu-system-x86_64\" \"$@\"' %s \"$@\"\n")
                    % (BACKPORTS_SUITE, "".join(binds), shlex.quote(qdir)), mode=0o755)
                missing = [l.split()[0] for l in _run(
                    ["ldd", os.path.join(root, "usr", "bin", "qemu-system-x86_64")]).splitlines()
                    if "not found" in l]
                if missing:
                    raise LabError("QEMU %s needs libraries this host lacks: %s (install them "
                                   "with apt-get; tools/deps.sh lists the lab's packages)"
                                   % (ver, ", ".join(missing)))
                with open(os.path.join(root, "qemu.json"), "w") as f:
                    json.dump({"version": ver, "packages": BACKPORTS_QEMU_PACKAGES}, f)
                if os.path.exists(qdir):
                    shutil.rmtree(qdir)
                os.rename(root, qdir)
                log("QEMU %s ready in %.1fs" % (ver, time.monotonic() - t0))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            self._prune("bpo-qemu-", keep=os.path.basename(qdir))
        self.qemu = wrapper

    def ensure(self):
        """Builds whatever is missing; returns self with the artefact paths set."""
        os.makedirs(self.cache_dir, exist_ok=True)
        with _flock(os.path.join(self.cache_dir, ".lock")):
            self._ensure_qemu()
            kdir, meta = self._ensure_kernel()
            self._ensure_initramfs(kdir, meta)
            self._ensure_data()
        return self


def _debian_mirror():
    """The Debian mirror the host's apt sources name (deb.debian.org where none is found)."""
    paths = ["/etc/apt/sources.list"]
    with contextlib.suppress(OSError):
        paths += sorted(os.path.join("/etc/apt/sources.list.d", f)
                        for f in os.listdir("/etc/apt/sources.list.d")
                        if f.endswith((".list", ".sources")))
    for path in paths:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        m = re.search(r"^(?:deb\s+(?:\[[^]]*\]\s+)?|URIs:\s*)(\S+/debian)/?\s", text, re.M)
        if m:
            return m.group(1)
    return "http://deb.debian.org/debian"


def lab_flavour(flavour=None):
    """The flavour asked for, else PLIMSOLL_LAB_FLAVOUR, else stable; LabError if unknown."""
    f = flavour or os.environ.get("PLIMSOLL_LAB_FLAVOUR") or "stable"
    if f not in FLAVOURS:
        raise LabError("unknown lab flavour %r (one of %s)" % (f, ", ".join(FLAVOURS)))
    return f


def _caps_key(qemu):
    """What libvirt's QEMU capability cache depends on, roughly."""
    parts = [_file_id(qemu),
             _file_id(os.path.realpath(_which("libvirtd"))), os.uname().release,
             str(os.path.exists("/dev/kvm"))]
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def prepare(cache_dir=DEFAULT_CACHE_DIR, stream_mib=700, hot_mib=128, warm_caps=True,
            flavour="stable"):
    """Builds the cached artefacts of a flavour and warms libvirt's QEMU capability cache."""
    art = Artefacts(cache_dir, stream_mib, hot_mib, flavour).ensure()
    if warm_caps:
        caps_dir = os.path.join(art.cache_dir, "libvirt-cache")
        stamp = os.path.join(caps_dir, ".plimsoll-warm" + ("" if flavour == "stable"
                                                           else "-" + flavour))
        key = _caps_key(art.qemu)
        try:
            with open(stamp) as f:
                warm = f.read().strip() == key
        except OSError:
            warm = False
        if not warm:
            t0 = time.monotonic()
            log("warming libvirt's QEMU capability cache (first start is slow)")
            state = tempfile.mkdtemp(prefix="plimsoll-lab-warm-")
            lab = Lab(state_dir=state, cache_dir=cache_dir, stream_mib=stream_mib,
                      hot_mib=hot_mib, cleanup_at_exit=True)
            try:
                lab.start(_prepare=False)
                lab.virsh("domcapabilities", "--virttype", "qemu", "--emulatorbin", art.qemu)
            finally:
                lab.stop()
            _atomic_write(stamp, key + "\n")
            log("capability cache warm in %.1fs" % (time.monotonic() - t0))
    return art


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------

def _proc_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rfind(")") + 2:][:1] not in ("Z", "X")


def _proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _proc_environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def lab_qemu_pids(state_dir):
    """Live QEMU processes started by the lab at state_dir (marked through qemu:env)."""
    marker = ("%s=%s" % (ENV_MARKER, os.path.realpath(state_dir))).encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        cmd = _proc_cmdline(pid)
        if not cmd or b"qemu-system" not in os.path.basename(cmd[0]):
            continue
        if marker in _proc_environ(pid) and _proc_alive(pid):
            pids.append(pid)
    return pids


def _reap_child(pid):
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _wait_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while True:
        for p in pids:
            _reap_child(p)
        alive = [p for p in pids if _proc_alive(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _kill_all(pids, timeout=5.0):
    """SIGTERM, wait, SIGKILL. Returns pids still alive afterwards."""
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGTERM)
    alive = _wait_gone(pids, timeout)
    for p in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)
    return _wait_gone(alive, 5.0)


# --------------------------------------------------------------------------------------
# The lab
# --------------------------------------------------------------------------------------

_HB_RE = re.compile(r"^PLIMSOLL-HB (.*)$")
_WL_RE = re.compile(r"^PLIMSOLL-WL (.*)$")


def _parse_kv(text):
    out = {}
    for tok in text.split():
        k, sep, v = tok.partition("=")
        if not sep:
            continue
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    return out


def parse_heartbeats(console_text):
    """All complete heartbeat lines of a console log, oldest first, as dicts."""
    beats = []
    for line in console_text.splitlines():
        m = _HB_RE.match(line.strip("\r"))
        if not m:
            continue
        kv = _parse_kv(m.group(1))
        if all(isinstance(kv.get(k), (int, float)) for k in HEARTBEAT_KEYS):
            beats.append(kv)
    return beats


def parse_workload_lines(console_text):
    return [_parse_kv(m.group(1)) for m in
            (_WL_RE.match(line.strip("\r")) for line in console_text.splitlines()) if m]


def parse_dommemstat(text):
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


class Lab:
    """A private libvirtd plus guests, all state under state_dir.

    Thread-compatible, not thread-safe: use one Lab from one thread. Several Lab
    objects (and processes) may run at once as long as their state dirs differ; they
    share only cache_dir, which is locked while it is being built.

    If cleanup_at_exit is true (the default), the lab is torn down at interpreter exit
    and by a small watchdog process if this process dies without running atexit
    (SIGKILL). The CLI's `up` turns this off so that the lab outlives it.
    """

    def __init__(self, state_dir=None, cache_dir=None, workload_bin=None,
                 stream_mib=700, hot_mib=128, cleanup_at_exit=True, flavour=None):
        if state_dir is None:
            state_dir = tempfile.mkdtemp(prefix="plimsoll-lab-")
        self.state_dir = os.path.realpath(state_dir)
        self._cache_dir_given = bool(cache_dir)
        self.cache_dir = os.path.realpath(
            cache_dir or os.environ.get("PLIMSOLL_LAB_CACHE") or DEFAULT_CACHE_DIR)
        if workload_bin is None and os.path.exists(DEFAULT_WORKLOAD_BIN):
            workload_bin = DEFAULT_WORKLOAD_BIN
        self.workload_bin = os.path.realpath(workload_bin) if workload_bin else None
        self.stream_mib = stream_mib
        self.hot_mib = hot_mib
        self.cleanup_at_exit = cleanup_at_exit
        self.flavour = lab_flavour(flavour)  # guests' default (add_guest(flavour=) overrides)
        self._flavour_artefacts = {}
        self.uri = "qemu:///system?socket=%s" % self.socket_path
        self.timings = {}
        self.artefacts = None
        self._proc = None
        self._reaper = None
        self._atexit_registered = False
        self._guests = {}
        self._load_meta()

    # ---- paths and metadata --------------------------------------------------------
    @property
    def socket_path(self):
        return os.path.join(self.state_dir, "sock", "libvirt-sock")

    @property
    def pidfile(self):
        return os.path.join(self.state_dir, "libvirtd.pid")

    def _p(self, *parts):
        return os.path.join(self.state_dir, *parts)

    def console_path(self, name):
        return self._p("guests", name + ".console")

    def channel_path(self, name):
        """The host end of the guest's agent channel (a unix socket QEMU listens on). Under the
        state folder, not libvirt's channel folder: that one is private to the lab's libvirtd
        mount namespace, and plimsolld runs outside it."""
        return self._p("channels", name + ".sock")

    def _load_meta(self):
        try:
            with open(self._p("lab.json")) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            return
        self._guests = meta.get("guests", {})
        if not self._cache_dir_given and meta.get("cache_dir"):
            self.cache_dir = meta["cache_dir"]  # attach to a running lab as it was made
        if not self.workload_bin and meta.get("workload_bin"):
            self.workload_bin = meta["workload_bin"]

    def _save_meta(self):
        meta = {"uri": self.uri, "cache_dir": self.cache_dir, "pid": self.libvirtd_pid(),
                "workload_bin": self.workload_bin, "guests": self._guests,
                "artefacts": self.artefacts and {"vmlinux": self.artefacts.vmlinux,
                                                 "initramfs": self.artefacts.initramfs,
                                                 "data_img": self.artefacts.data_img}}
        _atomic_write(self._p("lab.json"), json.dumps(meta, indent=1) + "\n")

    def libvirtd_pid(self):
        """pid of this lab's libvirtd if it is alive, else None."""
        try:
            with open(self.pidfile) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        cmd = b" ".join(_proc_cmdline(pid))
        if _proc_alive(pid) and b"libvirtd" in cmd and self.state_dir.encode() in cmd:
            return pid
        return None

    # ---- daemon --------------------------------------------------------------------
    def _write_state(self):
        os.makedirs(self.state_dir, exist_ok=True)
        marker = self._p(STATE_MARKER)
        if not os.path.exists(marker):
            if any(e for e in os.listdir(self.state_dir)):
                raise LabError("state dir %s is not empty and not a lab" % self.state_dir)
            with open(marker, "w") as f:
                f.write("plimsoll lab state; `lab.py down --state %s` removes it\n"
                        % self.state_dir)
        if len(self.socket_path) + len("-admin") > SOCKET_PATH_MAX:
            raise LabError("state dir path too long for a unix socket: %s" % self.state_dir)
        for d in ("sock", "etc", "run", "lib", "log", "ovl", "guests"):
            os.makedirs(self._p(d), exist_ok=True)
        caps = os.path.join(self.cache_dir, "libvirt-cache")
        os.makedirs(caps, exist_ok=True)
        S = self.state_dir
        _atomic_write(self._p("etc", "libvirtd.conf"), "\n".join([
            'unix_sock_dir = "%s/sock"' % S,
            'auth_unix_rw = "none"',
            'auth_unix_ro = "none"',
            'unix_sock_rw_perms = "0700"',
            'unix_sock_ro_perms = "0700"',
            'unix_sock_admin_perms = "0700"',
            'log_outputs = "3:file:%s/libvirtd.log"' % S,
            'keepalive_interval = -1',
            ""]))
        _atomic_write(self._p("etc", "qemu.conf"), "\n".join([
            'user = "root"',
            'group = "root"',
            'dynamic_ownership = 0',
            'remember_owner = 0',
            'security_driver = "none"',
            'cgroup_controllers = [ ]',
            'stdio_handler = "file"',
            'namespaces = [ ]',
            ""]))
        # passwd/group with the account libvirtd insists on.
        for fname, lines in (("passwd", ["libvirt-qemu:x:{uid}:{gid}:Libvirt Qemu,,,:"
                                         "/var/lib/libvirt:/usr/sbin/nologin"]),
                             ("group", ["libvirt-qemu:x:{gid}:", "kvm:x:{kvm}:"])):
            with open("/etc/" + fname) as f:
                text = f.read()
            used = {int(l.split(":")[2]) for l in text.splitlines()
                    if l.count(":") >= 3 and l.split(":")[2].isdigit()}
            free = [i for i in range(64055, 65000) if i not in used]
            ids = {"uid": free[0], "gid": free[0], "kvm": free[1]}
            names = {l.split(":")[0] for l in text.splitlines() if ":" in l}
            if not text.endswith("\n"):
                text += "\n"
            for l in lines:
                if l.split(":")[0] not in names:
                    text += l.format(**ids) + "\n"
            _atomic_write(self._p(fname), text)
        # Namespace setup script: runs as the process that becomes libvirtd.
        binds = [(self._p("passwd"), "/etc/passwd"), (self._p("group"), "/etc/group"),
                 (self._p("etc"), "/etc/libvirt"), (self._p("run"), "/run/libvirt"),
                 (self._p("lib"), "/var/lib/libvirt"), (self._p("log"), "/var/log/libvirt"),
                 (caps, "/var/cache/libvirt")]
        script = ["#!/bin/sh", "# generated by tests/lab/lab.py", "set -e"]
        overlaid = set()
        for src, dst in binds:
            if not os.path.exists(dst):
                parent = os.path.dirname(dst)
                if not os.path.isdir(parent):
                    raise LabError("%s does not exist on this host" % parent)
                if parent not in overlaid:
                    tag = parent.strip("/").replace("/", "_")
                    up, work = self._p("ovl", tag, "upper"), self._p("ovl", tag, "work")
                    os.makedirs(up, exist_ok=True)
                    os.makedirs(work, exist_ok=True)
                    script.append("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,"
                                  "workdir=%s %s" % (parent, up, work, parent))
                    overlaid.add(parent)
                script.append("mkdir -p %s" % dst)
            script.append("mount --bind %s %s" % (src, dst))
        # libvirtd runs under a child subreaper: QEMU daemonises, and an orphaned QEMU
        # that nobody reaps promptly makes every `virsh destroy` wait ~2 s for it
        # (libvirt polls until the pid is gone; this machine's init reaps slowly).
        script.append("exec /usr/bin/python3 %s _subreaper %s -f %s -p %s" % (
            os.path.realpath(__file__), _which("libvirtd"), self._p("etc", "libvirtd.conf"),
            self.pidfile))
        _atomic_write(self._p("libvirtd-ns.sh"), "\n".join(script) + "\n", mode=0o755)

    def start(self, _prepare=True):
        """Starts the private libvirtd (and builds missing artefacts). Safe to call twice."""
        problem = preflight_problem()
        if problem:
            raise LabError(problem)
        if _prepare and self.artefacts is None:
            t0 = time.monotonic()
            self.artefacts = self.artefacts_of(self.flavour)
            self.timings["prepare_s"] = time.monotonic() - t0
        if self.libvirtd_pid() is not None:
            self._save_meta()
            return self
        self._write_state()
        self._arm_cleanup()
        t0 = time.monotonic()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.pidfile)
        out = open(self._p("libvirtd.out"), "ab")
        try:
            self._proc = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "/bin/sh",
                 self._p("libvirtd-ns.sh")],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                close_fds=True)
        finally:
            out.close()
        deadline = time.monotonic() + 90
        while True:
            if self._proc.poll() is not None:
                raise LabError("libvirtd exited with %s:\n%s" % (self._proc.returncode,
                                                                 self._log_tail()))
            if os.path.exists(self.socket_path):
                p = subprocess.run(["virsh", "-c", self.uri, "version"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, timeout=60)
                if p.returncode == 0:
                    break
            if time.monotonic() > deadline:
                raise LabError("libvirtd did not answer within 90 s:\n" + self._log_tail())
            time.sleep(0.05)
        self.timings["libvirtd_start_s"] = time.monotonic() - t0
        self._save_meta()
        log("libvirtd up in %.2fs (pid %d), %s" % (self.timings["libvirtd_start_s"],
                                                 self._proc.pid, self.uri))
        return self

    def _log_tail(self, n=30):
        out = []
        for f in ("libvirtd.out", "libvirtd.log"):
            with contextlib.suppress(OSError), open(self._p(f), errors="replace") as fh:
                out.append("--- %s\n%s" % (f, "".join(fh.readlines()[-n:])))
        return "\n".join(out)

    def _arm_cleanup(self):
        if not self.cleanup_at_exit:
            return
        if not self._atexit_registered:
            atexit.register(self._atexit_stop)
            self._atexit_registered = True
        if self._reaper is None:
            # Tears the lab down if this process dies without running atexit.
            self._reaper = subprocess.Popen(
                ["/usr/bin/python3", os.path.realpath(__file__), "_reap", "--state",
                 self.state_dir, "--parent", str(os.getpid())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)

    def _atexit_stop(self):
        with contextlib.suppress(Exception):
            if os.path.exists(self._p(STATE_MARKER)):
                self.stop()

    def stop(self):
        """Destroys all guests, stops libvirtd, checks no QEMU is left, removes state_dir.

        The cache dir is kept. Raises LabError if a QEMU process of this lab survives.
        """
        t0 = time.monotonic()
        proc, self._proc = self._proc, None
        try:
            down(self.state_dir)
        finally:
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.wait(timeout=10)
            if self._reaper is not None:
                with contextlib.suppress(ProcessLookupError):
                    self._reaper.terminate()
                with contextlib.suppress(Exception):
                    self._reaper.wait(timeout=5)
                self._reaper = None
        self._guests = {}
        self.timings["stop_s"] = time.monotonic() - t0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---- virsh ---------------------------------------------------------------------
    def virsh(self, *args, timeout=60, check=True):
        """Runs `virsh -c <uri> ARGS...` and returns its stdout."""
        return _run(["virsh", "-c", self.uri] + [str(a) for a in args], check=check,
                    timeout=timeout)

    def artefacts_of(self, flavour):
        """The built artefacts of a flavour (built on first use)."""
        flavour = lab_flavour(flavour)
        if flavour not in self._flavour_artefacts:
            self._flavour_artefacts[flavour] = prepare(self.cache_dir, self.stream_mib,
                                                       self.hot_mib, flavour=flavour)
        return self._flavour_artefacts[flavour]

    def domains(self):
        """Names of running domains."""
        return [l.strip() for l in self.virsh("list", "--name").splitlines() if l.strip()]

    # ---- guests --------------------------------------------------------------------
    def domain_xml(self, name, workload="idle", memory_mib=1024, cmdline_extra="", run=None,
                   autodeflate=True, anon_mib=256, anon_after=0, guest_uuid=None, balloon=True,
                   hot_mib=None, agent_channel=True, serial_controller=True, network=True, vsock_cid=None,
                   on_reboot="destroy", flavour=None):
        """The libvirt XML add_guest() would create (exposed for tests and debugging).

        flavour: the guest's kernel and QEMU (FLAVOURS); the lab's default where None.

        balloon=False gives the guest no balloon device (`<memballoon model='none'/>`).
        agent_channel: the agent's virtio-serial port (AGENT_CHANNEL_NAME), its host end at
        channel_path(name); serial_controller=False leaves out the virtio-serial controller too
        (a guest that cannot take a hot-plugged channel). network=False: no network interface
        at all (an agent on the channel needs none).
        vsock_cid: a virtio vsock device with this guest CID (>= 3, unique on the host; needs
        /dev/vhost-vsock on the host, and the vsock transport modules in the guest, which
        GUEST_MODULES does not load: see guest_has_vsock()).
        on_reboot: what a guest reboot (or `virsh reset`) does: "destroy" (the default: the
        transient domain is gone) or "restart" (the guest boots again in the same QEMU).
        hot_mib: the "hot" workload re-reads only the first hot_mib MiB of the lab's hot file
        (at most the lab's hot_mib), so guests of one lab can have hot sets of their own."""
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", name):
            raise LabError("bad guest name %r" % name)
        if on_reboot not in ("destroy", "restart"):
            raise LabError("on_reboot must be destroy or restart, not %r" % on_reboot)
        if workload not in WORKLOADS:
            raise LabError("unknown workload %r (one of %s)" % (workload, ", ".join(WORKLOADS)))
        if workload != "idle" and not self.workload_bin:
            raise LabError("workload %r needs the guest_workload binary: bazel build "
                           "//tests/lab:guest_workload or pass workload_bin" % workload)
        if self.artefacts is None:
            raise LabError("start() the lab first")
        art = self.artefacts_of(flavour or self.flavour)
        args = ["console=ttyS0", "quiet", "loglevel=4", "panic=1", "rdinit=/init",
                "plimsoll.name=%s" % name, "plimsoll.workload=%s" % workload,
                "plimsoll.anon_mib=%d" % int(anon_mib), "plimsoll.anon_after=%g" % anon_after]
        if self.workload_bin:
            args.append("plimsoll.wl=%s" % self.workload_bin)
        if hot_mib is not None:
            if not 0 < int(hot_mib) <= self.hot_mib:
                raise LabError("hot_mib=%r must be in (0, %d], the lab's hot file" % (hot_mib, self.hot_mib))
            args.append("plimsoll.hot_mib=%d" % int(hot_mib))
        if run:
            if not os.path.isabs(run) or not os.access(run, os.X_OK):
                raise LabError("run=%r must be an absolute path to an executable" % run)
            args.append("plimsoll.run=%s" % os.path.realpath(run))
        for a in args:
            if re.search(r"\s", a):
                raise LabError("kernel argument with whitespace: %r" % a)
        if cmdline_extra:
            args.append(cmdline_extra)
        cmdline = " ".join(args)
        kvm = kvm_usable()
        esc = lambda s: (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                         .replace("'", "&apos;"))
        cache_mode = "none" if _supports_o_direct(art.data_img) else "writeback"
        if agent_channel and not serial_controller:
            raise LabError("an agent channel needs the virtio-serial controller")
        serial = ""
        if serial_controller:
            serial += "    <controller type='virtio-serial' index='0'/>\n"
        if agent_channel:
            path = self.channel_path(name)
            if len(path) > SOCKET_PATH_MAX:
                raise LabError("channel socket path %s is longer than %d bytes" % (path, SOCKET_PATH_MAX))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            serial += ("    <channel type='unix'>\n      <source mode='bind' path='%s'/>\n"
                       "      <target type='virtio' name='%s'/>\n    </channel>\n"
                       % (esc(path), AGENT_CHANNEL_NAME))
        if vsock_cid is not None:
            if not 3 <= int(vsock_cid) < 0xffffffff:
                raise LabError("vsock_cid=%r is not a guest CID (3 .. 2^32-2)" % (vsock_cid,))
            serial += ("    <vsock model='virtio'>\n      <cid auto='no' address='%d'/>\n    </vsock>\n"
                       % int(vsock_cid))
        nic = ("    <interface type='user'>\n      <model type='virtio'/>\n      <rom enabled='no'/>\n"
               "    </interface>\n") if network else ""
        return """<domain type='{dtype}' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <memory unit='MiB'>{mib}</memory>
  <currentMemory unit='MiB'>{mib}</currentMemory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{vmlinux}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features><acpi/>{tcg}</features>{cpu}
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>{on_reboot}</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{qemu}</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw' cache='{cache_mode}'{aio}/>
      <source file='{data}'/>
      <target dev='vda' bus='virtio'/>
      <readonly/>
      <shareable/>
    </disk>
    <filesystem type='mount' accessmode='passthrough' multidevs='remap'>
      <source dir='/'/>
      <target dir='hostroot'/>
      <readonly/>
    </filesystem>
{nic}{serial}    <controller type='usb' model='none'/>
    <serial type='file'>
      <source path='{console}' append='off'/>
      <target port='0'/>
    </serial>
{memballoon}  </devices>
  <qemu:commandline>
    <qemu:env name='{marker}' value='{state}'/>
  </qemu:commandline>
</domain>
""".format(dtype="kvm" if kvm else "qemu", name=name, uuid=guest_uuid or uuid.uuid4(), mib=int(memory_mib),
           vmlinux=esc(art.vmlinux), initrd=esc(art.initramfs), cmdline=esc(cmdline),
           cpu="\n  <cpu mode='host-passthrough'/>" if kvm else "",
           tcg="" if kvm else "<tcg><tb-cache unit='MiB'>%d</tb-cache></tcg>" % TCG_TB_CACHE_MIB,
           qemu=esc(art.qemu), data=esc(art.data_img),
           console=esc(self.console_path(name)),
           marker=ENV_MARKER, state=esc(self.state_dir), cache_mode=cache_mode,
           memballoon=(("    <memballoon model='virtio' autodeflate='%s' freePageReporting='on'>\n"
                        "      <stats period='1'/>\n    </memballoon>\n")
                       % ("on" if autodeflate else "off") if balloon
                       else "    <memballoon model='none'/>\n"),
           aio=" io='native'" if cache_mode == "none" else "", nic=nic, serial=serial, on_reboot=on_reboot)

    def add_guest(self, name, workload="idle", memory_mib=1024, cmdline_extra="", run=None,
                  autodeflate=True, anon_mib=256, anon_after=0, guest_uuid=None, balloon=True,
                  hot_mib=None, agent_channel=True, serial_controller=True, network=True, vsock_cid=None,
                  on_reboot="destroy", flavour=None):
        """Creates and starts a transient guest; returns at once (see wait_ready).

        guest_uuid: the domain (and SMBIOS) UUID, e.g. to derive the agent's token before boot.
        balloon=False: no balloon device at all; such a guest never reports balloon stats, so
        wait for its heartbeat (wait_ready() waits for stats and would time out).
        agent_channel, serial_controller, network, vsock_cid, on_reboot, flavour: see
        domain_xml()."""
        if self.libvirtd_pid() is None:
            self.start()
        if self.artefacts is None:
            self.artefacts = self.artefacts_of(self.flavour)
        flavour = lab_flavour(flavour or self.flavour)
        xml = self.domain_xml(name, workload, memory_mib, cmdline_extra, run, autodeflate,
                              anon_mib, anon_after, guest_uuid, balloon=balloon, hot_mib=hot_mib,
                              agent_channel=agent_channel, serial_controller=serial_controller,
                              network=network, vsock_cid=vsock_cid, on_reboot=on_reboot,
                              flavour=flavour)
        xml_path = self._p("guests", name + ".xml")
        _atomic_write(xml_path, xml)
        for stale in (self.console_path(name), self.channel_path(name)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stale)
        t0 = time.monotonic()
        self.virsh("create", xml_path)
        self._guests[name] = {"workload": workload, "memory_mib": int(memory_mib),
                              "flavour": flavour,
                              "autodeflate": bool(autodeflate), "balloon": bool(balloon), "run": run,
                              "created_wall": time.time(), "created_mono": t0}
        self._save_meta()
        log("guest %s created (%s, %d MiB, %s) in %.2fs" % (name, workload, memory_mib, flavour,
                                                            time.monotonic() - t0))

    def console(self, name):
        """The guest's serial console output so far."""
        try:
            with open(self.console_path(name), "rb") as f:
                return f.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def heartbeats(self, name):
        return parse_heartbeats(self.console(name))

    def heartbeat(self, name):
        """The last complete heartbeat of the guest as a dict (ints; uptime float).

        Raises LabError if there is none yet."""
        beats = self.heartbeats(name)
        if not beats:
            raise LabError("guest %s has not sent a heartbeat yet" % name)
        return beats[-1]

    def workload_lines(self, name):
        """Parsed `PLIMSOLL-WL` lines of the guest's workload, oldest first."""
        return parse_workload_lines(self.console(name))

    def dommemstat(self, name):
        """`virsh dommemstat NAME` as {tag: KiB int}."""
        return parse_dommemstat(self.virsh("dommemstat", name))

    def disk_read_bytes(self, name, dev="vda"):
        """`virsh domblkstat NAME DEV`'s rd_bytes: what QEMU saw the guest read from DEV."""
        for line in self.virsh("domblkstat", name, dev).splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] == "rd_bytes":
                return int(parts[2])
        raise RuntimeError("no rd_bytes in domblkstat %s %s" % (name, dev))

    def wait_ready(self, name, timeout=60):
        """Waits for the first heartbeat and for dommemstat to report `usable`.

        Returns seconds since the guest was created (when known)."""
        deadline = time.monotonic() + timeout
        have_hb = False
        while True:
            if not have_hb and "PLIMSOLL-HB" in self.console(name):
                have_hb = bool(self.heartbeats(name))
            if have_hb:
                try:
                    if "usable" in self.dommemstat(name):
                        break
                except LabError:
                    pass
            if name not in self.domains():
                raise LabError("guest %s is gone; console tail:\n%s" % (
                    name, self.console(name)[-3000:]))
            if time.monotonic() > deadline:
                raise LabError("guest %s not ready after %ss (heartbeat=%s); console tail:\n%s"
                               % (name, timeout, have_hb, self.console(name)[-3000:]))
            time.sleep(0.1)
        created = self._guests.get(name, {}).get("created_mono")
        took = time.monotonic() - created if created else None
        if took is not None:
            self.timings["ready_%s_s" % name] = took
            log("guest %s ready %.2fs after create (guest uptime %.2fs)" % (
                name, took, self.heartbeats(name)[0]["uptime"]))
        return took

    def setmem(self, name, mib):
        """Sets the live balloon target (returns before the balloon moves)."""
        self.virsh("setmem", name, "%dM" % int(mib), "--live")

    def wait_actual(self, name, mib, tolerance=0.05, timeout=30):
        """Waits until dommemstat `actual` is within tolerance of mib; returns seconds."""
        t0 = time.monotonic()
        target = int(mib) * 1024
        while True:
            actual = self.dommemstat(name).get("actual", -1)
            if abs(actual - target) <= tolerance * target:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise LabError("guest %s: actual=%d KiB, target %d KiB after %ss" % (
                    name, actual, target, timeout))
            time.sleep(0.1)

    def destroy(self, name):
        """`virsh destroy NAME` (the transient domain disappears)."""
        self.virsh("destroy", name)
        self._guests.pop(name, None)
        self._save_meta()

    def status(self):
        """{name: {"state":..., "heartbeat": dict or None, "dommemstat": dict}}."""
        out = {}
        running = set(self.domains()) if self.libvirtd_pid() else set()
        for name in sorted(set(self._guests) | running):
            beats = self.heartbeats(name)
            st = {"state": "running" if name in running else "gone",
                  "heartbeat": beats[-1] if beats else None}
            if name in running:
                with contextlib.suppress(LabError):
                    st["dommemstat"] = self.dommemstat(name)
            out[name] = st
        return out


def down(state_dir, timeout=20):
    """Tears down the lab at state_dir, also one left behind by a killed process.

    Destroys the guests through libvirtd if it answers, stops libvirtd (SIGTERM, then
    SIGKILL), kills any QEMU of this lab that is left, then removes state_dir. Raises
    LabError if a QEMU process of the lab survives.
    """
    state_dir = os.path.realpath(state_dir)
    if not os.path.isdir(state_dir):
        return
    if not os.path.exists(os.path.join(state_dir, STATE_MARKER)):
        if not os.listdir(state_dir):  # a Lab that was never started
            os.rmdir(state_dir)
            return
        raise LabError("%s is not a lab state dir (no %s)" % (state_dir, STATE_MARKER))
    lab = Lab(state_dir=state_dir, cleanup_at_exit=False)
    pid = lab.libvirtd_pid()
    if pid is not None and os.path.exists(lab.socket_path):
        try:
            for name in lab.domains():
                lab.virsh("destroy", name, check=False, timeout=30)
        except LabError as e:
            log("could not list/destroy guests through libvirtd: %s" % e)
    if pid is not None:
        if _kill_all([pid], timeout=timeout):
            raise LabError("libvirtd %d survived SIGKILL" % pid)
    left = lab_qemu_pids(state_dir)
    if left:
        log("killing leftover qemu processes %s" % left)
        _kill_all(left)
    left = lab_qemu_pids(state_dir)
    if left:
        raise LabError("qemu processes of lab %s survive: %s" % (state_dir, left))
    # The subreaper exits by itself once its children are gone; make sure of it.
    _kill_all(_lab_helper_pids(state_dir, b"_subreaper"), timeout=3)
    shutil.rmtree(state_dir, ignore_errors=True)


def _lab_helper_pids(state_dir, verb):
    """pids of `lab.py VERB ...` processes of this lab (matched by their argv)."""
    conf = os.path.join(state_dir, "etc", "libvirtd.conf").encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            cmd = _proc_cmdline(int(entry))
            if verb in cmd and conf in cmd and _proc_alive(int(entry)):
                pids.append(int(entry))
    return pids


def _subreaper_main(argv):
    """Runs argv as a child and reaps every orphan reparented to us until none is left.

    Signals SIGTERM/SIGINT/SIGHUP are forwarded to the child. Exits with its status."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.stderr.write("lab.py _subreaper: prctl failed, errno %d\n" % ctypes.get_errno())
    child = os.fork()
    if child == 0:
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)

    def forward(signum, _frame):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    rc = 0
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return rc
        if pid == child:
            rc = os.waitstatus_to_exitcode(status)


def _reap_main(state_dir, parent):
    """Watchdog: tears the lab down when `parent` dies while the lab still exists."""
    with contextlib.suppress(OSError):
        os.setsid()
    try:
        pidfd = os.pidfd_open(parent)
    except OSError:
        pidfd = None
    marker = os.path.join(state_dir, STATE_MARKER)
    while os.path.exists(marker):
        if pidfd is not None:
            r, _, _ = select.select([pidfd], [], [], 1.0)
            if r:
                break
        else:
            if not _proc_alive(parent):
                break
            time.sleep(1.0)
    else:
        return 0
    time.sleep(0.5)  # let a stop() that raced with the exit finish
    if os.path.exists(marker):
        with contextlib.suppress(Exception):
            down(state_dir)
    return 0


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------

def _parse_guest(spec):
    parts = spec.split(":")
    if len(parts) < 2 or len(parts) > 5:
        raise argparse.ArgumentTypeError(
            "guest spec is NAME:WORKLOAD[:MIB[:ANON_MIB[:ANON_AFTER]]], got %r" % spec)
    g = {"name": parts[0], "workload": parts[1],
         "memory_mib": int(parts[2]) if len(parts) > 2 and parts[2] else 1024}
    if len(parts) > 3 and parts[3]:
        g["anon_mib"] = int(parts[3])
    if len(parts) > 4 and parts[4]:
        g["anon_after"] = float(parts[4])
    if g["workload"] not in WORKLOADS:
        raise argparse.ArgumentTypeError("unknown workload in %r" % spec)
    return g


def main(argv=None):
    ap = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="build cached artefacts, warm QEMU capability cache")
    p.add_argument("--cache", default=None)
    p.add_argument("--stream-mib", type=int, default=700)
    p.add_argument("--hot-mib", type=int, default=128)
    p.add_argument("--flavour", choices=FLAVOURS, default=None,
                   help="guest kernel and QEMU (default: $PLIMSOLL_LAB_FLAVOUR or stable)")
    p = sub.add_parser("up", help="start libvirtd and guests, wait ready, print URI=")
    p.add_argument("--state", required=True)
    p.add_argument("--cache", default=None)
    p.add_argument("--guest", action="append", type=_parse_guest, default=[],
                   metavar="NAME:WORKLOAD:MIB[:ANON_MIB[:ANON_AFTER]]")
    p.add_argument("--workload-bin", default=None)
    p.add_argument("--run", default=None, help="executable started in every guest's chroot")
    p.add_argument("--no-autodeflate", action="store_true")
    p.add_argument("--cmdline-extra", default="")
    p.add_argument("--stream-mib", type=int, default=700)
    p.add_argument("--hot-mib", type=int, default=128)
    p.add_argument("--timeout", type=float, default=90)
    p.add_argument("--flavour", choices=FLAVOURS, default=None,
                   help="guests' kernel and QEMU (default: $PLIMSOLL_LAB_FLAVOUR or stable)")
    p = sub.add_parser("down", help="destroy guests, stop libvirtd, remove state")
    p.add_argument("--state", required=True)
    p = sub.add_parser("status", help="guests and their last heartbeat")
    p.add_argument("--state", required=True)
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("_subreaper")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p = sub.add_parser("_reap")
    p.add_argument("--state", required=True)
    p.add_argument("--parent", type=int, required=True)
    args = ap.parse_args(argv)

    try:
        if args.cmd == "_subreaper":
            return _subreaper_main(args.argv)
        if args.cmd == "_reap":
            return _reap_main(os.path.realpath(args.state), args.parent)
        if args.cmd == "prepare":
            problem = preflight_problem()
            if problem:
                raise LabError(problem)
            t0 = time.monotonic()
            art = prepare(args.cache or os.environ.get("PLIMSOLL_LAB_CACHE") or DEFAULT_CACHE_DIR,
                          args.stream_mib, args.hot_mib, flavour=lab_flavour(args.flavour))
            print("VMLINUX=%s\nINITRAMFS=%s\nDATA_IMG=%s\nQEMU=%s" % (
                art.vmlinux, art.initramfs, art.data_img, art.qemu))
            log("prepare took %.2fs" % (time.monotonic() - t0))
            return 0
        if args.cmd == "down":
            down(args.state)
            return 0
        if args.cmd == "status":
            lab = Lab(state_dir=args.state, cleanup_at_exit=False)
            if not os.path.exists(lab._p(STATE_MARKER)):
                print("no lab at %s" % lab.state_dir)
                return 1
            pid = lab.libvirtd_pid()
            st = lab.status()
            if args.json:
                print(json.dumps({"uri": lab.uri, "libvirtd_pid": pid, "guests": st}, indent=1))
                return 0
            print("URI=%s libvirtd_pid=%s" % (lab.uri, pid or "-"))
            for name, g in st.items():
                hb = g["heartbeat"]
                ms = g.get("dommemstat", {})
                print("%s state=%s actual_kb=%s %s" % (
                    name, g["state"], ms.get("actual", "-"),
                    " ".join("%s=%s" % kv for kv in hb.items()) if hb else "heartbeat=none"))
            return 0
        if args.cmd == "up":
            lab = Lab(state_dir=args.state, cache_dir=args.cache, workload_bin=args.workload_bin,
                      stream_mib=args.stream_mib, hot_mib=args.hot_mib, cleanup_at_exit=False,
                      flavour=args.flavour)
            was_running = lab.libvirtd_pid() is not None
            try:
                lab.start()
                existing = set(lab.domains())
                for g in args.guest:
                    if g["name"] in existing:
                        log("guest %s already running" % g["name"])
                        continue
                    lab.add_guest(g["name"], g["workload"], g["memory_mib"],
                                  cmdline_extra=args.cmdline_extra, run=args.run,
                                  autodeflate=not args.no_autodeflate,
                                  anon_mib=g.get("anon_mib", 256),
                                  anon_after=g.get("anon_after", 0))
                for g in args.guest:
                    lab.wait_ready(g["name"], timeout=args.timeout)
            except BaseException:
                if not was_running:
                    log("up failed; tearing the lab down")
                    with contextlib.suppress(Exception):
                        lab.stop()
                raise
            print("URI=%s" % lab.uri)
            sys.stdout.flush()
            return 0
    except LabError as e:
        sys.stderr.write("lab.py %s: error: %s\n" % (args.cmd, e))
        return 1
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # `lab.py status | head`
        sys.exit(0)
