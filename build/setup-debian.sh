#!/bin/sh
# Installs the Debian packages ruvoy needs to build (ruby-dev), and with
# "test" those the tests and benchmarks use, and makes the container
# test's base (build/container-base.sh). Only what is missing is
# installed or made, so a second run costs nothing.
set -eu
packages="ruby-dev ruby-rack build-essential curl"
if [ "${1:-}" = test ]; then
  packages="$packages puma thin unicorn ruby-async ruby-async-http ruby-sinatra
    ruby-rails ruby-rack-timeout ruby-sqlite3 ruby-pg ruby-faye-websocket bundler wrk nghttp2-client
    nginx haproxy postgresql chromium strace iproute2 podman runc debootstrap"
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
if [ "${1:-}" = test ] && [ "$(cat /proc/sys/net/ipv4/tcp_migrate_req 2>/dev/null)" = 0 ]; then
  # The overlapping-restart test (docs/deployment.md): connections queued
  # on the old process's listener when it closes move to the new one
  # instead of being reset (Linux 5.14+).
  echo "setting net.ipv4.tcp_migrate_req=1"
  echo 1 | $sudo tee /proc/sys/net/ipv4/tcp_migrate_req >/dev/null ||
    echo "warning: could not set net.ipv4.tcp_migrate_req=1" >&2
fi
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "installing:$missing"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
if [ "${1:-}" = test ]; then
  # The base of the container test's image, a Debian root made once with
  # debootstrap (minutes): here rather than within the tests' timeout.
  "$(dirname "$0")/container-base.sh" >/dev/null
fi
