#!/bin/sh
# Prints the C flags (cflags) or linker flags (ldflags) for building against
# the system's libruby, read from RbConfig at build time: nothing in the
# project names a Ruby version or path.
#   CGO_CFLAGS="$(build/rbconfig.sh cflags)" CGO_LDFLAGS="$(build/rbconfig.sh ldflags)" go build ./cmd/ruvoy
ruby=${RUBY:-ruby}
case "$1" in
cflags)
  exec "$ruby" -rrbconfig -e 'c = RbConfig::CONFIG; puts "-I#{c["rubyarchhdrdir"]} -I#{c["rubyhdrdir"]}"' ;;
ldflags)
  if [ "$("$ruby" -rrbconfig -e 'print RbConfig::CONFIG["ENABLE_SHARED"]')" = no ]; then
    echo "build/rbconfig.sh: $("$ruby" -e 'print RbConfig.ruby') was built without a shared libruby, which ruvoy" \
      "embeds: use a Ruby built with --enable-shared (ruby-build: RUBY_CONFIGURE_OPTS=--enable-shared)" >&2
    exit 1
  fi
  # The directory that holds libruby: libdir, or archlibdir on Debian.
  exec "$ruby" -rrbconfig -e 'c = RbConfig::CONFIG
    dir = [c["libdir"], c["archlibdir"]].compact.find { |d| File.exist?(File.join(d, c["LIBRUBY_SO"])) } || c["libdir"]
    puts ["-L#{dir}", "-Wl,-rpath,#{dir}", c["LIBRUBYARG_SHARED"], c["LIBS"]].join(" ").split.join(" ")' ;;
*)
  echo "usage: $0 cflags|ldflags" >&2; exit 2 ;;
esac
