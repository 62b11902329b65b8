#!/bin/sh
# build/ruby-yjit.sh SUITE [MIRROR]: run inside a Debian root of SUITE, as
# root (build/debian-root.sh SUITE-yjit runs it once, in the copy of the
# SUITE root it makes). It rebuilds the suite's own ruby3.3 package from
# Debian's source with YJIT, and installs it over Debian's:
#
# - `apt-get source ruby3.3` (a deb-src line for SUITE), the same
#   debian/rules with `--enable-yjit` in place of `--disable-yjit`, and the
#   suite's rustc (YJIT's Rust needs 1.58 or later; trixie has 1.85);
#   version VERSION+ruvoy.yjit1, held so that apt keeps it. The same
#   configure arguments, paths and ABI as Debian's, so every gem the root
#   has from Debian's packages (puma, sqlite3, pg, nokogiri, Rails) loads
#   on it unchanged. YJIT stays off until asked for (--yjit,
#   RUBY_YJIT_ENABLE=1, RubyVM::YJIT.enable: Rails 7.2's config.yjit).
# - A Ruby as ruby-build makes it by default, with a static libruby (no
#   --enable-shared), in /opt/ruby-static: what ruvoy cannot embed, for
#   the test that the build and the gem's command say so
#   (test/yjit_test.go, TestYJITStaticRubyRefused).
set -eu
suite=${1:?usage: build/ruby-yjit.sh SUITE [MIRROR]}
mirror=${2:-http://deb.debian.org/debian}
pkg=${RUBY_PACKAGE:-ruby3.3}
export DEBIAN_FRONTEND=noninteractive
jobs=$(nproc)

echo "deb-src $mirror $suite main" >/etc/apt/sources.list.d/ruvoy-deb-src.list
apt-get update -qq
# The build's own dependencies, and rustc.
apt-get build-dep -y -qq --no-install-recommends "$pkg" >/dev/null
apt-get install -y -qq --no-install-recommends rustc dpkg-dev >/dev/null

work=$(mktemp -d /var/tmp/ruby-yjit.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
# A mirror that serves an older snapshot of a suite (this machine's:
# forky's ruby3.3 .dsc answers 404) may lack the .dsc while it has the
# tarballs: they are then unpacked as dpkg-source would, and the build's
# dpkg-source --before-build applies the patches.
if ! apt-get source -q "$pkg" >"$work/source.log" 2>&1; then
  orig=$(ls ./"$pkg"_*.orig.tar.* 2>/dev/null | head -1)
  deb=$(ls ./"$pkg"_*.debian.tar.* 2>/dev/null | head -1)
  [ -n "$orig" ] && [ -n "$deb" ] || { cat "$work/source.log"; exit 1; }
  echo "apt-get source $pkg: no .dsc; unpacking $orig and $deb"
  mkdir "$pkg-src" && tar -xf "$orig" -C "$pkg-src" --strip-components=1 && tar -xf "$deb" -C "$pkg-src"
fi
src=$(find . -maxdepth 1 -type d -name "$pkg-*" | head -1)
cd "$src"
grep -q -- '--disable-yjit' debian/rules || { echo "build/ruby-yjit.sh: debian/rules no longer says --disable-yjit" >&2; exit 1; }
# The static Ruby's source: this one with Debian's patches (its bundled
# gems are Debian's packages, not files to download as upstream's build
# would), before the package's build touches it.
cp -a . "$work/static" && (cd "$work/static" && dpkg-source --before-build . >/dev/null)
sed -i 's/--disable-yjit/--enable-yjit/' debian/rules
# What a package for a local root needs not pay for: debug symbols split
# and compressed (nostrip, dwz), timestamps normalized, xz (gzip -1 here).
printf '\noverride_dh_strip_nondeterminism: ;\noverride_dh_dwz: ;\noverride_dh_builddeb:\n\tdh_builddeb -- -Zgzip -z1\n' >>debian/rules
version=$(dpkg-parsechangelog -S Version)
{
  printf '%s (%s+ruvoy.yjit1) %s; urgency=medium\n\n' "$pkg" "$version" "$suite"
  printf '  * Built with YJIT (--enable-yjit) by ruvoy'"'"'s build/ruby-yjit.sh.\n\n'
  printf ' -- ruvoy <ruvoy@localhost>  %s\n\n' "$(date -R)"
  cat debian/changelog
} >debian/changelog.new && mv debian/changelog.new debian/changelog
echo "building $pkg $version with YJIT (dpkg-buildpackage -B, $jobs jobs)"
DEB_BUILD_OPTIONS="nocheck nodoc nostrip noautodbgsym parallel=$jobs" dpkg-buildpackage -B -uc -us >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; exit 1; }
cd "$work"
dpkg -i ./lib"$pkg"_*.deb ./"$pkg"_*.deb ./"$pkg"-dev_*.deb >/dev/null
apt-mark hold lib"$pkg" "$pkg" "$pkg"-dev >/dev/null
ruby --yjit -e 'exit RubyVM::YJIT.enabled?' || { echo "build/ruby-yjit.sh: the Ruby built has no YJIT" >&2; exit 1; }

# ruby-build's default: ./configure --prefix=DIR, no --enable-shared (a
# static libruby); YJIT built in when rustc is there, as here. Built as
# Debian builds its own (make main, make install-nodoc).
# RUBY_STATIC=no leaves it out.
[ "${RUBY_STATIC:-yes}" = no ] && exit 0
echo "building Ruby with a static libruby in /opt/ruby-static (ruby-build's default)"
cd static
{ ./configure --prefix=/opt/ruby-static --disable-install-doc && make -j"$jobs" main && make install-nodoc; } >"$work/static.log" 2>&1 ||
  { tail -40 "$work/static.log"; exit 1; }
[ "$(/opt/ruby-static/bin/ruby -e 'print RbConfig::CONFIG["ENABLE_SHARED"]')" = no ]
