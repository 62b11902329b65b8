# ruvoy: `make` builds the binary; `make serve` sets up and serves
# examples/hello; `make test` sets up and runs every check CI runs.

# Read once, before the build's flags are exported: GNU make 4.4 gives a
# $(shell) the exported variables, and so would ask Ruby for its flags
# (before setup has installed it, on a fresh machine) at each one.
ifeq ($(origin GO),undefined)
GO := $(shell command -v go || echo /usr/local/go/bin/go)
endif
SOURCES := $(shell find . -name '*.go' -o -name '*.c' -o -name '*.h' -o -name '*.rb' | grep -v '^./test/') go.mod go.sum
export CGO_ENABLED := 1
export CGO_CFLAGS = $(shell build/rbconfig.sh cflags) $(EXTRA_CFLAGS)
export CGO_LDFLAGS = $(shell build/rbconfig.sh ldflags 2>/dev/null)
# A Ruby ruvoy cannot embed (one without a shared libruby, as ruby-build
# makes by default) stops a build before Go's linker, with
# build/rbconfig.sh's word on what to do, said once.
RUBY_CHECK = @build/rbconfig.sh ldflags >/dev/null

.PHONY: all setup setup-test preflight serve test check unit e2e e2e-memory e2e-ruby e2e-core e2e-yjit e2e-static-ruby test-trixie test-forky test-yjit stress-short fuzz-short bench bench-forky bench-waits gem clean

all: ruvoy

# Setting up comes before Ruby is there to ask for its flags: those
# recipes run without them (else build/rbconfig.sh says "ruby: not found").
setup setup-test: CGO_CFLAGS =
setup setup-test: CGO_LDFLAGS =

setup:
	@build/setup-debian.sh

setup-test:
	@build/setup-debian.sh test

# What `make test` needs from the machine (root, 2 CPUs, Chromium,
# PostgreSQL, nginx, HAProxy, kernel settings), checked before the
# hour-long run, with one error listing what is missing.
preflight:
	@test/preflight

ruvoy: $(SOURCES)
	$(RUBY_CHECK)
	$(GO) build -o $@ ./cmd/ruvoy

# The same binary with the race detector and cgo's pointer checks
# (GOEXPERIMENT=cgocheck2) both on: the e2e tests run against it.
ruvoy-race: $(SOURCES)
	$(RUBY_CHECK)
	GOEXPERIMENT=cgocheck2 $(GO) build -race -o $@ ./cmd/ruvoy

serve: setup ruvoy
	./ruvoy examples/hello/config.ru

# Formatting, vet, and the C compiled with -Werror.
check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above need formatting"; exit 1; }
	EXTRA_CFLAGS=-Werror $(GO) vet ./...

# The unit tests; the host's and the request path's also against a
# stand-in VM in Go (-tags standin: built without internal/vm).
unit:
	$(GO) test -race -count=1 ./internal/... ./lib/... ./caddy ./cmd/...
	$(GO) test -race -count=1 -tags standin ./internal/host ./internal/serve ./internal/cluster/worker

# Every end-to-end test but the one that needs a Ruby with a static
# libruby, which the trixie-yjit root has (test-yjit runs it there), in
# one pass with every check on: the race detector (in the binary and the
# tests), cgo's pointer checks, and YJIT, as production runs Ruby:
# RUBY_YJIT_ENABLE=1 reaches every server the tests start (ruvoy in one
# process, its workers, forked or booted, and Puma beside it), and
# test/yjit_test.go checks from requests that it is on (RUVOY_TEST_YJIT).
# Debian 12's Ruby 3.1 is built with YJIT (its YJIT in C, as Ruby 3.1 had
# it); Ruby without YJIT is what test-trixie and test-forky run. Ruby 3.1's
# YJIT writes its whole code region as it starts, 256 MiB by default: 0.3 s
# of each of the hundreds of processes the tests start. 64 MiB is room to
# spare for the test apps' code (test/apps/yjit.ru's: 160 KB).
e2e: ruvoy-race
	RUBY_YJIT_ENABLE=1 RUBYOPT=--yjit-exec-mem-size=64 RUVOY_TEST_YJIT=1 RUVOY_BIN=$(CURDIR)/ruvoy-race $(GO) test -race -count=1 -timeout 60m ./test/... -skip '^TestStaticRubyRefused$$'

# The hostile clients' tests with memory bounds once more against the
# plain binary: the race detector's shadow memory makes those bounds four
# times as loose (test/hostile_test.go's memoryScale), and one holds only
# without it.
MEMORY_TESTS := ^TestHostile(ClientPlaces|H2ZeroWindow|H2Floods|HeadFlood)$$
e2e-memory: ruvoy
	RUVOY_BIN=$(CURDIR)/ruvoy $(GO) test -count=1 -timeout 20m ./test/... -run '$(MEMORY_TESTS)'

# Five short cycles of the mixed-stress harness (`go run ./stress` runs
# three long ones): resources at rest must stay flat across them.
stress-short: ruvoy
	$(GO) run ./stress -short -cycles 5 -bin ./ruvoy

# Short runs of the fuzzers: Go's fuzzing of the HTTP/1 smuggling guard
# and of the wire's two request-head readers (Go's and C's, held against
# each other), and the end-to-end differential fuzzer against the binary (`go run
# ./fuzz -d 10m` for a long one; docs/protocols.md).
fuzz-short: ruvoy
	$(GO) test ./internal/h1guard -run '^$$' -fuzz FuzzGuard -fuzztime 50000x
	$(GO) test ./internal/vm -run '^$$' -fuzz FuzzRequestHeadReaders -fuzztime 50000x
	$(GO) run ./fuzz -d 20s -bin ./ruvoy

# The end-to-end tests that concern Ruby, Rack and the frameworks (the
# gem, the Rack handler, Rails, Sinatra and Action Cable among them).
RUBY_TESTS := Core|Stream|Hijack|Cluster|Frameworks|Cable|Conventions|EarlyHints|ShipGem|Offload|Runaway|WebSocket
e2e-ruby: ruvoy
	RUVOY_BIN=$(CURDIR)/ruvoy $(GO) test -count=1 -short -timeout 30m ./test/... -run '$(RUBY_TESTS)'

# The same checks against Debian 13's Ruby 3.3, Rack 3.1 and Rails 7.2, in
# a Debian root made once from Debian's registry (build/debian-root.sh).
test-trixie:
	build/debian-root.sh trixie make check ruvoy unit e2e-ruby

# The core end-to-end tests, the rackup handler and the Rack::Lint and
# framing comparisons with Puma: what the newest Rack, rackup and Puma can
# break; and a --preload cluster's stop, what the newest glibc broke (its
# join of a forked worker's VM thread).
CORE_TESTS := ^Test(Core|FrameworksRackHandler|FrameworksRackLintMatchesPuma|FrameworksFramingMatchesPuma|ClusterPreloadStop$$)
e2e-core: ruvoy
	RUVOY_BIN=$(CURDIR)/ruvoy $(GO) test -count=1 -short -timeout 20m ./test/... -run '$(CORE_TESTS)'

# Those against Debian's testing suite (forky: Ruby 3.3, Rack 3.2,
# rackup 2.3, Puma 8), in a root the same script makes.
test-forky:
	build/debian-root.sh forky make check e2e-core

# The Ruby-facing end-to-end tests with YJIT on (as e2e runs them all),
# without the race detector: the core, streaming, hijack and WebSocket,
# cluster (with its chaos, with and without --preload), frameworks, Action
# Cable, offload, runaway and gem tests, those where Ruby runs.
YJIT_TESTS := Core|Stream|Hijack|WebSocket|Cluster|Frameworks|Cable|Offload|Runaway|ShipGem|YJIT
e2e-yjit: ruvoy
	RUBY_YJIT_ENABLE=1 RUVOY_TEST_YJIT=1 RUVOY_BIN=$(CURDIR)/ruvoy $(GO) test -count=1 -short -timeout 30m ./test/... -run '$(YJIT_TESTS)'

# The same on Debian 13's Ruby 3.3 built with YJIT (in Rust) from
# Debian's source (build/ruby-yjit.sh), in a copy of the trixie root, and
# the check of a Ruby with a static libruby (TestStaticRubyRefused), which
# that root has too. Not part of make test: building the two Rubies takes
# 45 minutes and more on this 2-core machine (docs/benchmarks.md, "YJIT");
# once made they are cached with the roots.
test-yjit:
	build/debian-root.sh trixie-yjit make ruvoy e2e-yjit e2e-static-ruby

e2e-static-ruby: ruvoy
	RUVOY_BIN=$(CURDIR)/ruvoy $(GO) test -count=1 -timeout 10m ./test/... -run '^TestStaticRubyRefused$$'

# CI=1: a test whose prerequisite is missing fails instead of skipping
# (test/prereq_test.go); build/debian-root.sh passes CI into the roots.
test: export CI := $(or $(CI),1)
test: setup-test preflight check ruvoy unit e2e e2e-memory stress-short fuzz-short test-trixie test-forky

# The runtime under plain net/http, without Caddy: a benchmark diagnostic.
ruvoy-nethttp: $(SOURCES)
	$(RUBY_CHECK)
	$(GO) build -o $@ ./bench/nethttp

# Go's net/http answering by itself: the HTTP layer's floor, for the benchmark.
go-plain: bench/plain/main.go
	$(GO) build -o $@ ./bench/plain

# Every server and scenario, the host's (Debian 12: Ruby 3.1, Puma 5.6)
# and, from a forky root, Puma 8 and ruvoy on Ruby 3.3 (bench/roots.go);
# BENCH_FLAGS narrows a run (bench/README.md).
bench: setup-test ruvoy ruvoy-nethttp go-plain
	bench/run $(BENCH_FLAGS)

# The Puma 8 cells alone, beside the host's: the no-op app at 100
# connections and one, and the Rails page across workers
# (docs/benchmarks.md, "Puma 8").
BENCH_FORKY_SERVERS := ruvoy,puma-5,puma-100,go-plain,ruvoy-w1,ruvoy-w2,puma-w1,puma-w2-preload
bench-forky: setup-test ruvoy ruvoy-nethttp go-plain
	bench/run -servers $(BENCH_FORKY_SERVERS),$$(echo $(BENCH_FORKY_SERVERS) | sed 's/\([^,]*\)/forky:\1/g') \
		-scenarios noop,noop-c1,rails-page $(BENCH_FLAGS)

# Pages that wait (PostgreSQL's pg_sleep, an HTTP API) and the render on
# PostgreSQL, with YJIT on, in forky's root with its ruby3.3 rebuilt with
# YJIT (build/debian-root.sh forky-yjit: Puma 8, Rails 7.2): ruvoy (pool
# 25) beside Puma 8 -t 5 (pool 5, as Rails configures it) and -t 25
# (pool 25), in one process and -w 2 --preload (docs/benchmarks.md, "YJIT").
BENCH_WAITS_SERVERS := ruvoy+pool25+yjit,puma-5+yjit,puma-25+yjit,ruvoy-w2-preload+pool25+yjit,puma-5-w2-preload+yjit,puma-25-w2-preload+yjit
bench-waits: setup-test ruvoy ruvoy-nethttp go-plain
	bench/run -servers $$(echo $(BENCH_WAITS_SERVERS) | sed 's/\([^,]*\)/forky-yjit:\1/g') \
		-scenarios rails-pg-page,rails-pg-db5,rails-pg-db50,rails-pg-http50 $(BENCH_FLAGS)

# The platform gem: the binary for this Ruby's ABI, its launcher, the Rack
# handler. pkg/ruvoy-VERSION-PLATFORM.gem
gem: $(SOURCES)
	$(RUBY_CHECK)
	rm -rf pkg/gem && mkdir -p pkg/gem/libexec pkg/gem/lib/ruvoy pkg/gem/lib/rack/handler pkg/gem/lib/rackup/handler
	cp gem/ruvoy.gemspec README.md pkg/gem/
	cp -r gem/exe pkg/gem/
	$(GO) build -ldflags "-s -w" -o pkg/gem/libexec/ruvoy ./cmd/ruvoy
	ruby -e 'c = RbConfig::CONFIG; puts [c["ruby_version"], Gem::Platform.local.to_s, c["arch"]].join(" ")' > pkg/gem/libexec/RUBY_ABI
	cp gem/ruvoy.rb pkg/gem/lib/
	cp lib/ruvoy/version.rb lib/ruvoy/rack_handler.rb pkg/gem/lib/ruvoy/
	cp lib/rack/handler/ruvoy.rb pkg/gem/lib/rack/handler/
	cp lib/rackup/handler/ruvoy.rb pkg/gem/lib/rackup/handler/
	cd pkg/gem && gem build --quiet ruvoy.gemspec && mv ruvoy-*.gem ..

clean:
	rm -rf ruvoy ruvoy-race ruvoy-nethttp go-plain pkg
