#!/bin/sh
# build/debian-root.sh SUITE [COMMAND...]: makes, once, a Debian root of
# SUITE (trixie, forky, ...) with the Ruby, Rack and frameworks that suite
# ships, and runs COMMAND in it on a copy of this checkout, with the host's
# Go and module cache. So `make test` builds and tests ruvoy against
# another Debian's Ruby on the same machine.
#
# RUVOY_ROOT_SRC=keep runs COMMAND on the copy the last run left in the
# root's /src instead of making a new one (bench/run starts its servers in
# a root that way, after one run has built there). COMMAND is the process
# the script becomes, with the root's own pid 1 and mounts, in this one's
# process group: a signal to the group reaches it.
#
# The root is cached in $RUVOY_ROOTS (default /var/cache/ruvoy)/SUITE; a
# change to the package list below installs what is missing on the next
# run. As root (or with sudo): debootstrap, chroot and mounts need it.
#
# SUITE-yjit (trixie-yjit) is the SUITE root, copied once, with its Ruby
# rebuilt from Debian's source with YJIT by build/ruby-yjit.sh (and a Ruby
# with a static libruby in /opt/ruby-static): the same ABI, so the same
# Debian gems; cached beside it.
set -eu
suite=${1:?usage: build/debian-root.sh SUITE [COMMAND...]}
shift
roots=${RUVOY_ROOTS:-/var/cache/ruvoy}
root=$roots/$suite
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The same names in every suite: "ruby" is the suite's Ruby (ruby3.3 in
# trixie). What ruvoy needs to build, what the tests run inside, and wrk
# for bench/run.
packages="ruby ruby-dev gcc make libc6-dev ca-certificates git curl procps
  ruby-rack ruby-rackup puma ruby-rails ruby-sqlite3 ruby-pg ruby-sinatra bundler
  ruby-faye-websocket ruby-rack-timeout postgresql chromium wrk"
packages=$(echo $packages)
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
here=$(cd "$(dirname "$0")/.." && pwd)
go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

# in_root COMMAND...: runs COMMAND in the root with /proc, /dev and a
# fresh /tmp, and Go, its module cache and its build cache from the host
# at the same paths (the root then takes the packages without cgo from the
# cache). The mounts live in a private mount namespace, the command in its
# own pid namespace: both go when it ends, whatever happens.
in_root() {
  goroot=$("$go" env GOROOT)
  modcache=$("$go" env GOMODCACHE)
  gocache=$("$go" env GOCACHE)
  mkdir -p "$modcache" "$gocache"
  $sudo cp /etc/resolv.conf "$root/etc/resolv.conf"
  ${exec:-} $sudo unshare --mount --pid --fork --propagation private sh -eu -c '
root=$1 goroot=$2 modcache=$3 gocache=$4; shift 4
for d in "$goroot" "$modcache" "$gocache"; do
  mkdir -p "$root$d" && mount --bind "$d" "$root$d"
done
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/dev/shm"
mount -t tmpfs tmpfs "$root/tmp"
exec chroot "$root" env -i HOME=/root TERM=dumb LANG=C.UTF-8 CI="${CI:-}" DEBIAN_FRONTEND=noninteractive \
  PATH="$goroot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  GOMODCACHE="$modcache" GOCACHE="$gocache" GOTOOLCHAIN=local \
  sh -c "cd /src 2>/dev/null || cd /; exec \"\$@\"" sh "$@"
' sh "$root" "$goroot" "$modcache" "$gocache" "$@"
}

base=""
case $suite in
*-yjit) base=${suite%-yjit} ;;
esac

if [ ! -e "$root/.ruvoy-packages" ] && [ -n "$base" ]; then
  "$here/build/debian-root.sh" "$base"
  echo "making the $suite root in $root (once): the $base root, with Ruby built with YJIT"
  $sudo rm -rf "$root.new"
  $sudo cp -a "$roots/$base" "$root.new"
  $sudo rm -rf "$root.new/src" "$root.new/.ruvoy-packages"
  $sudo cp "$here/build/ruby-yjit.sh" "$root.new/usr/local/sbin/ruvoy-ruby-yjit"
  made=$root
  root=$root.new
  if ! in_root ruvoy-ruby-yjit "$base" "$mirror" >"$roots/$suite.log" 2>&1; then
    tail -40 "$roots/$suite.log"
    exit 1
  fi
  root=$made
  $sudo cp "$roots/$base/.ruvoy-packages" "$root.new/.ruvoy-packages"
  $sudo rm -rf "$root" && $sudo mv "$root.new" "$root"
fi
if [ ! -e "$root/.ruvoy-packages" ]; then
  command -v debootstrap >/dev/null || {
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  # A suite newer than this debootstrap (forky on Debian 12) is made with
  # the script of sid, which it follows.
  script=/usr/share/debootstrap/scripts/$suite
  [ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
  echo "making the Debian $suite root in $root (once)"
  $sudo rm -rf "$root.new"
  $sudo mkdir -p "$roots"
  $sudo debootstrap --variant=minbase "$suite" "$root.new" "$mirror" "$script" >"$roots/$suite.log" 2>&1 ||
    { tail -20 "$roots/$suite.log"; exit 1; }
  # No service starts in the root (postgresql's would).
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$root.new/usr/sbin/policy-rc.d" >/dev/null
  $sudo chmod +x "$root.new/usr/sbin/policy-rc.d"
  $sudo rm -rf "$root" && $sudo mv "$root.new" "$root"
fi
if [ "$(cat "$root/.ruvoy-packages" 2>/dev/null)" != "$packages" ]; then
  # apt, not debootstrap, resolves them: debootstrap does not follow a
  # dependency on a virtual package (chromium's on dbus-session-bus).
  # The testing suite's index says it is valid for a week; a mirror that
  # serves an older snapshot (this machine's registry: forky's index
  # expired on 2026-11-06) would make apt refuse it, so the root's apt
  # does not check.
  echo "installing into the Debian $suite root: $packages"
  echo 'Acquire::Check-Valid-Until "false";' | $sudo tee "$root/etc/apt/apt.conf.d/99ruvoy-snapshot" >/dev/null
  in_root sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $packages >/dev/null"
  echo "$packages" | $sudo tee "$root/.ruvoy-packages" >/dev/null
fi
[ $# = 0 ] && exit 0

if [ "${RUVOY_ROOT_SRC:-}" = keep ]; then
  [ -d "$root/src" ] || { echo "no copy of the checkout in $root/src to keep" >&2; exit 1; }
  exec=exec in_root "$@"
fi

# The checkout's files (tracked, and new ones not ignored) are copied to
# /src in the root, a repository of its own (make check reads git
# ls-files): the root's builds must not overwrite the host's.
$sudo rm -rf "$root/src" && $sudo mkdir -p "$root/src"
(cd "$here" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - 2>/dev/null) | $sudo tar -xf - -C "$root/src"
$sudo git -C "$root/src" init -q && $sudo git -C "$root/src" add -A
# An example's Gemfile.lock names the gems of the Debian it was locked on
# (examples/rails72: Debian 13's Rails 7.2.2.2). Where the suite ships the
# same Rails at another patch level (forky: 7.2.4, with Rack 3.2), the copy
# is locked again against the gems installed there, as a user upgrading
# would (`bundle lock --local --update`); one whose Rails is absent (6.1)
# stays as it is.
in_root sh -c 'for lock in examples/*/Gemfile.lock; do
  dir=${lock%/Gemfile.lock}
  (cd "$dir" && bundle check >/dev/null 2>&1) && continue
  (cd "$dir" && bundle lock --local --update >/dev/null 2>&1) && echo "$dir: Gemfile.lock locked again against this suite'"'"'s gems"
done; true'
exec=exec in_root "$@"
