#!/bin/sh
# build/container-base.sh: makes, once, the Debian root that
# TestDeployContainerImage (test/container_test.go) imports with `podman
# import` as the base of examples/rails/Dockerfile, in the place of
# docker.io/library/ruby:VERSION-slim: no image registry answers this
# machine, Debian's does. Debian 12's Ruby (the one `make gem` builds
# ruvoy for here), with the gems examples/rails locks (Rails 6.1, sqlite3,
# pg, Puma) from Debian's packages, as rubygems.org would give them, and
# the packages Rails 8's Dockerfile adds to its base (curl, jemalloc,
# sqlite3). Prints the root's path.
#
# The root is cached in $RUVOY_ROOTS (default /var/cache/ruvoy)/container-SUITE,
# and made again when the package list below changes. As root (or with
# sudo): debootstrap needs it.
set -eu
suite=${1:-bookworm}
roots=${RUVOY_ROOTS:-/var/cache/ruvoy}
root=$roots/container-$suite
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages="ruby bundler ruby-rails ruby-sqlite3 ruby-pg puma libjemalloc2 sqlite3 curl ca-certificates"
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo

if [ "$(cat "$root/.ruvoy-packages" 2>/dev/null)" != "$packages" ]; then
  command -v debootstrap >/dev/null || {
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  echo "making the container base ($suite: $packages) in $root (once)" >&2
  $sudo rm -rf "$root.new"
  $sudo mkdir -p "$roots"
  $sudo debootstrap --variant=minbase --include="$(echo $packages | tr ' ' ,)" "$suite" "$root.new" "$mirror" \
    >"$roots/container-$suite.log" 2>&1 || { tail -20 "$roots/container-$suite.log" >&2; exit 1; }
  # An image's root has no package lists (they are fetched again in a
  # build, as Rails' Dockerfile does) and no apt cache.
  $sudo rm -rf "$root.new/var/lib/apt/lists/"* "$root.new/var/cache/apt/archives/"*.deb
  echo "$packages" | $sudo tee "$root.new/.ruvoy-packages" >/dev/null
  $sudo rm -rf "$root" && $sudo mv "$root.new" "$root"
fi
echo "$root"
