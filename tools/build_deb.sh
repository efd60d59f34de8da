#!/bin/bash
# Builds the Debian packages with one command, and prints their paths (host first, one a line):
#   tools/build_deb.sh [--out DIR] [--version VERSION] [--without-agent] [--no-strip] [--fastbuild]
#
# plimsoll_<version>_<arch>.deb, for the host: /usr/bin/plimsolld, /usr/bin/plimsollctl,
# /lib/systemd/system/plimsolld.service, the default config /etc/plimsoll/plimsolld.textproto
# and /etc/default/plimsolld (conffiles), and /usr/share/doc/plimsoll (README, docs,
# Prometheus rules, Grafana dashboard); and plimsoll-placement (docs/placement.md):
# /usr/bin/plimsoll-placement, its Python code and the gRPC stubs generated here from the
# protos in /usr/lib/plimsoll-placement, its unit and /etc/plimsoll/placement.conf (conffile);
# its Python modules are Suggests (only OpenStack hosts run it).
# plimsoll-agent_<version>_<arch>.deb, for guests (when the //agent:plimsoll-agent target
# exists): /usr/bin/plimsoll-agent, /lib/systemd/system/plimsoll-agent.service, the udev rule
# /lib/udev/rules.d/60-plimsoll-agent.rules that starts it when the domain's virtio-serial port
# appears, /etc/default/plimsoll-agent (conffile) and /usr/share/doc/plimsoll-agent.
# Binaries are built by Bazel with -c opt and stripped. Depends is computed from each
# package's binaries by dpkg-shlibdeps (dpkg-dev), or, without it, from the packages owning the
# libraries they link. Install with: apt install ./plimsoll_<version>_<arch>.deb (host),
# apt install ./plimsoll-agent_<version>_<arch>.deb (guest).
#
# --out DIR        where the .debs go (default dist/ under the checkout)
# --version V      package version (default 0.1.0+git<commits>.<hash>[.dirty])
# --without-agent  build the host package only
# --no-strip       keep symbols in the binaries
# --fastbuild      pack the -c fastbuild binaries the tests build, not -c opt ones: for the
#                  end-to-end packaging test, which tests the package, not the optimiser (an
#                  opt build of everything takes minutes of the suite); never for shipping
#
# Bazel's convenience symlinks (bazel-bin, ...) are left alone (--symlink_prefix=/): they keep
# pointing at the fastbuild tree the tests use.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

BASE_VERSION=0.1.0
OUT="$ROOT/dist"
VERSION=""
WITH_AGENT=auto
STRIP=1
MODE=opt
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --out=*) OUT="${1#--out=}"; shift ;;
    --version) VERSION="$2"; shift 2 ;;
    --version=*) VERSION="${1#--version=}"; shift ;;
    --without-agent) WITH_AGENT=no; shift ;;
    --no-strip) STRIP=0; shift ;;
    --fastbuild) MODE=fastbuild; shift ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_deb: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

say() { echo "build_deb: $*" >&2; }

if [ -z "$VERSION" ]; then
  VERSION="${BASE_VERSION}+git$(git rev-list --count HEAD).$(git rev-parse --short=7 HEAD)"
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    VERSION="${VERSION}.dirty"
  fi
fi
if ! [[ "$VERSION" =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
  say "version \"$VERSION\" is not a Debian version (digits first; letters, digits, . + ~)"
  exit 2
fi
ARCH="$(dpkg --print-architecture)"

tools/deps.sh
. tools/bazel_env.sh
BAZEL_OPTS=(-c "$MODE" --symlink_prefix=/)
TARGETS=(//server:plimsolld //ctl:plimsollctl)
AGENT=0
if [ "$WITH_AGENT" = auto ]; then
  if [ -f agent/BUILD.bazel ] && bazel query //agent:plimsoll-agent >/dev/null 2>&1; then
    TARGETS+=(//agent:plimsoll-agent)
    AGENT=1
  else
    say "no //agent:plimsoll-agent target: no guest package"
  fi
fi
say "building ${TARGETS[*]} (-c $MODE)"
bazel build "${BAZEL_OPTS[@]}" "${TARGETS[@]}"
BIN="$(bazel info "${BAZEL_OPTS[@]}" bazel-bin 2>/dev/null)"

umask 022
# Reproducible file dates: the commit time unless the caller set one.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}"
STAGE="$(mktemp -d /tmp/plimsoll-deb.XXXXXX)"
trap 'rm -rf "$STAGE"' EXIT
PKG="$STAGE/plimsoll_${VERSION}_${ARCH}"
DOC="$PKG/usr/share/doc/plimsoll"
mkdir -p "$PKG/DEBIAN" "$PKG/usr/bin" "$PKG/lib/systemd/system" "$PKG/etc/plimsoll" \
         "$PKG/etc/default" "$DOC/prometheus" "$DOC/grafana"

put_bin() {  # source, name[, package root]
  local root="${3:-$PKG}"
  install -m 0755 "$1" "$root/usr/bin/$2"
  if [ "$STRIP" = 1 ]; then
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/$2"
  fi
}
put_bin "$BIN/server/plimsolld" plimsolld
put_bin "$BIN/ctl/plimsollctl" plimsollctl
install -m 0644 deploy/systemd/plimsolld.service "$PKG/lib/systemd/system/"
install -m 0644 deploy/config/plimsolld.textproto "$PKG/etc/plimsoll/"
install -m 0644 deploy/default/plimsolld "$PKG/etc/default/"
CONFFILES=(/etc/plimsoll/plimsolld.textproto /etc/default/plimsolld)
install -m 0644 README.md "$DOC/"
for f in docs/*.md; do
  [ -e "$f" ] && install -m 0644 "$f" "$DOC/"
done
install -m 0644 deploy/prometheus/prometheus.yml deploy/prometheus/alerts.yml \
                deploy/prometheus/alerts_test.yml deploy/prometheus/fleet_rules.yml \
                deploy/prometheus/fleet_rules_test.yml "$DOC/prometheus/"
install -m 0644 deploy/grafana/plimsoll-dashboard.json "$DOC/grafana/"

# Depends of a package, from what its binaries link: depends_of PACKAGE BINARY...
depends_of() {
  local name="$1"; shift
  local binaries=("$@") out="" line
  if command -v dpkg-shlibdeps >/dev/null; then
    rm -rf "$STAGE/shlibs"
    mkdir -p "$STAGE/shlibs/debian"
    printf 'Source: plimsoll\n\nPackage: %s\nArchitecture: any\n' "$name" > "$STAGE/shlibs/debian/control"
    if line="$(cd "$STAGE/shlibs" && dpkg-shlibdeps -O --warnings=0 "${binaries[@]}" 2>"$STAGE/shlibdeps.err")"; then
      out="${line#shlibs:Depends=}"
    else
      say "dpkg-shlibdeps failed for $name, using the packages that own the libraries:"
      cat "$STAGE/shlibdeps.err" >&2
    fi
  fi
  if [ -z "$out" ]; then
    # Without dpkg-dev: the package owning each directly linked library, at least its
    # installed upstream version.
    local -A seen=()
    local deps=() b lib path pkg ver
    for b in "${binaries[@]}"; do
      for lib in $(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        # "libx.so.1 => /path (addr)", or "/lib64/ld-linux-x86-64.so.2 (addr)" for the loader.
        path="$(ldd "$b" | awk -v l="$lib" '{ n = $1; sub(".*/", "", n) }
                                          n == l && !done { print ($3 ~ /^\//) ? $3 : $1; done = 1 }')"
        [ -n "$path" ] || { say "cannot resolve $lib needed by $b"; exit 1; }
        pkg="$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1)" || true
        [ -n "$pkg" ] || pkg="$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1)" || true
        [ -n "$pkg" ] || { say "no package owns $path ($lib)"; exit 1; }
        [ -n "${seen[$pkg]:-}" ] && continue
        seen[$pkg]=1
        ver="$(dpkg-query -W -f='${Version}' "$pkg")"
        ver="${ver%-*}"  # without the Debian revision, epoch kept
        deps+=("$pkg (>= $ver)")
      done
    done
    out="$(printf '%s\n' "${deps[@]}" | sort | paste -sd, | sed 's/,/, /g')"
  fi
  echo "$out"
}
DEPENDS="$(depends_of plimsoll "$PKG"/usr/bin/*)"

# plimsoll-placement: Python, so after the Depends of the binaries above. Its gRPC stubs are
# generated from the protos now, never committed.
PLIB="$PKG/usr/lib/plimsoll-placement"
mkdir -p "$PLIB/plimsoll_placement"
install -m 0755 placement/plimsoll-placement "$PLIB/"
for f in placement/plimsoll_placement/*.py; do
  case "$f" in *_test.py) ;; *) install -m 0644 "$f" "$PLIB/plimsoll_placement/" ;; esac
done
placement/gen_stubs.sh "$PLIB/gen" proto
ln -s ../lib/plimsoll-placement/plimsoll-placement "$PKG/usr/bin/plimsoll-placement"
install -m 0644 deploy/systemd/plimsoll-placement.service "$PKG/lib/systemd/system/"
install -m 0644 deploy/config/placement.conf "$PKG/etc/plimsoll/"
CONFFILES+=(/etc/plimsoll/placement.conf)

INSTALLED_SIZE="$(du -sk --exclude=DEBIAN "$PKG" | cut -f1)"
DESCRIPTION_EXTRA=""
if [ "$AGENT" = 1 ]; then
  DESCRIPTION_EXTRA=$'\n .\n Guests run plimsoll-agent, from the plimsoll-agent package.'
fi
cat > "$PKG/DEBIAN/control" <<EOF
Package: plimsoll
Version: $VERSION
Architecture: $ARCH
Maintainer: ${DEB_MAINTAINER:-plimsoll developers <plimsoll@localhost>}
Installed-Size: $INSTALLED_SIZE
Depends: $DEPENDS
Suggests: libvirt-daemon-system, prometheus, python3, python3-grpcio, python3-protobuf, python3-openstacksdk,
 python3-keystoneauth1
Section: admin
Priority: optional
Description: page-cache-aware memory balloon controller for KVM hosts
 plimsolld runs on a KVM host, reads every guest's virtio-balloon statistics
 through libvirt and the host's memory and pressure, decides a balloon target
 per guest with a pluggable policy and applies it, explaining every decision in
 logs, a gRPC control API (plimsollctl) and Prometheus metrics. It tells cold
 page cache from real demand and never shrinks a guest on stale statistics.
 .
 The package installs plimsolld in dry-run (/etc/default/plimsolld) and does not
 start it; see /usr/share/doc/plimsoll/operations.md.$DESCRIPTION_EXTRA
EOF
printf '%s\n' "${CONFFILES[@]}" > "$PKG/DEBIAN/conffiles"

UNITS="plimsolld.service plimsoll-placement.service"
cat > "$PKG/DEBIAN/postinst" <<EOF
#!/bin/sh
# Installing starts nothing: review /etc/plimsoll/plimsolld.textproto and /etc/default/plimsolld,
# then systemctl enable --now plimsolld. Upgrading restarts the units that were running.
set -e
if [ "\$1" = configure ]; then
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    if [ -n "\$2" ]; then
      systemctl try-restart $UNITS >/dev/null 2>&1 || true
    fi
  fi
  if [ -z "\$2" ]; then
    echo "plimsoll: installed, not started. plimsolld runs in dry-run until you empty" \\
         "PLIMSOLLD_ARGS in /etc/default/plimsolld; start it with: systemctl enable --now plimsolld"
  fi
fi
exit 0
EOF
cat > "$PKG/DEBIAN/prerm" <<EOF
#!/bin/sh
# Removing stops and disables the units; upgrading leaves them running (postinst restarts them).
set -e
if [ "\$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop $UNITS >/dev/null 2>&1 || true
  systemctl disable $UNITS >/dev/null 2>&1 || true
fi
exit 0
EOF
cat > "$PKG/DEBIAN/postrm" <<'EOF'
#!/bin/sh
# Purging also deletes plimsolld's saved state (/var/lib/plimsoll); dpkg deletes the conffiles.
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
  fi
fi
if [ "$1" = purge ]; then
  rm -rf /var/lib/plimsoll
  rmdir /etc/plimsoll 2>/dev/null || true
fi
exit 0
EOF
chmod 0755 "$PKG/DEBIAN/postinst" "$PKG/DEBIAN/prerm" "$PKG/DEBIAN/postrm"
chmod -R u+rwX,go+rX,go-w "$PKG"

DEB="$OUT/plimsoll_${VERSION}_${ARCH}.deb"
dpkg-deb --build --root-owner-group -Zxz "$PKG" "$DEB" >/dev/null
say "wrote $DEB ($(du -h "$DEB" | cut -f1))"
say "Depends: $DEPENDS"
echo "$DEB"

[ "$AGENT" = 1 ] || exit 0

# The guest package. Separate from the host's: a guest needs none of plimsolld's libraries
# (libvirt, prometheus-cpp), and a host is not a guest. Host packages before this one shipped
# the agent's files: Replaces/Breaks moves them (and the conffile) over.
GPKG="$STAGE/plimsoll-agent_${VERSION}_${ARCH}"
GDOC="$GPKG/usr/share/doc/plimsoll-agent"
mkdir -p "$GPKG/DEBIAN" "$GPKG/usr/bin" "$GPKG/lib/systemd/system" "$GPKG/lib/udev/rules.d" \
         "$GPKG/etc/default" "$GDOC"
put_bin "$BIN/agent/plimsoll-agent" plimsoll-agent "$GPKG"
install -m 0644 deploy/systemd/plimsoll-agent.service "$GPKG/lib/systemd/system/"
install -m 0644 deploy/udev/60-plimsoll-agent.rules "$GPKG/lib/udev/rules.d/"
install -m 0644 deploy/default/plimsoll-agent "$GPKG/etc/default/"
install -m 0644 docs/agent.md docs/security.md "$GDOC/"
GDEPENDS="$(depends_of plimsoll-agent "$GPKG"/usr/bin/*)"
cat > "$GPKG/DEBIAN/control" <<EOF
Package: plimsoll-agent
Version: $VERSION
Architecture: $ARCH
Maintainer: ${DEB_MAINTAINER:-plimsoll developers <plimsoll@localhost>}
Installed-Size: $(du -sk --exclude=DEBIAN "$GPKG" | cut -f1)
Depends: $GDEPENDS
Recommends: systemd, udev
Replaces: plimsoll (<< $VERSION)
Breaks: plimsoll (<< $VERSION)
Section: admin
Priority: optional
Description: guest agent of plimsoll, the page-cache-aware balloon controller
 plimsoll-agent runs inside a KVM guest and reports what only the guest knows
 (page cache activity, refaults, reclaim, PSI memory pressure) to plimsolld on
 the host, over the domain's virtio-serial port org.plimsoll.agent.0 (no
 network, no token), vsock, or TCP.
 .
 It starts by itself when the port appears (udev rule); for vsock or TCP set
 PLIMSOLL_AGENT_ARGS in /etc/default/plimsoll-agent and enable the unit.
EOF
echo /etc/default/plimsoll-agent > "$GPKG/DEBIAN/conffiles"
cat > "$GPKG/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# The udev rule starts the agent when the port appears; on a running guest the port is there
# already, so the rule is replayed for it now. Upgrading restarts a running agent.
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  if [ -n "$2" ]; then
    systemctl try-restart plimsoll-agent.service >/dev/null 2>&1 || true
  fi
  if command -v udevadm >/dev/null 2>&1; then
    udevadm control --reload-rules >/dev/null 2>&1 || true
    udevadm trigger --action=add --subsystem-match=virtio-ports >/dev/null 2>&1 || true
  fi
fi
exit 0
EOF
cat > "$GPKG/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# Removing stops and disables the agent; upgrading leaves it running (postinst restarts it).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop plimsoll-agent.service >/dev/null 2>&1 || true
  systemctl disable plimsoll-agent.service >/dev/null 2>&1 || true
fi
exit 0
EOF
cat > "$GPKG/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = remove ] || [ "$1" = purge ]; then
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || true
    if command -v udevadm >/dev/null 2>&1; then
      udevadm control --reload-rules >/dev/null 2>&1 || true
    fi
  fi
fi
exit 0
EOF
chmod 0755 "$GPKG/DEBIAN/postinst" "$GPKG/DEBIAN/prerm" "$GPKG/DEBIAN/postrm"
chmod -R u+rwX,go+rX,go-w "$GPKG"
GDEB="$OUT/plimsoll-agent_${VERSION}_${ARCH}.deb"
dpkg-deb --build --root-owner-group -Zxz "$GPKG" "$GDEB" >/dev/null
say "wrote $GDEB ($(du -h "$GDEB" | cut -f1))"
say "Depends (guest): $GDEPENDS"
echo "$GDEB"
