# make test is what CI runs (.ci/run). POSIX make; recipes use /bin/sh.

GO ?= go
FUZZTIME ?= 30s

# Five seconds of each of the three fuzzers on every make test: `time make
# fuzz-smoke` took 36 s on 2 cores with a warm build cache (other work on
# the machine); on a fresh clone the three fuzz binaries are built first,
# and 82 to 102 s were seen. The seed corpora run in the package tests,
# the smoke checks that fuzzing starts and finds nothing at once. make
# fuzz runs them for FUZZTIME.
FUZZSMOKE ?= 5s

# HEARTBEAT, put before a silent command in a recipe line, prints a line
# every 20 s while the line runs (go vet and the fuzzers' builds print
# nothing for a minute or more on a cold build cache).
HEARTBEAT = ( while sleep 20; do echo "make $@: still running"; done ) & trap "kill $$! 2>/dev/null" EXIT;

.PHONY: test redis-note fmt-check vet tidy-check deps-check bench fuzz fuzz-smoke

# Nested modules with tests that need no network beyond what the core's
# tests need (a local redis-server, miniredis): vetted and tested with the
# core. bench/ runs only the header tests named in the test target; its
# benchmarks are run by hand. compat runs the fleet's seams
# (internal/seams) on the newest go-redis, the root package on the one
# go.mod requires; sluicerueidis runs the core's conformance and fault
# suites on rueidis and valkey-go (a real server, the cluster, the fault
# matrix on rueidis).
NESTED_TESTED = sluiceotel grpclimit compat sluicerueidis

# The packages' tests run in parallel, all under the race detector: two
# packages more than the CPUs at a time (-p 4 on two cores). The three
# Redis providers, listed first so that they start first, spend their
# first two minutes or so in their sequential fault, outage and batching
# tests, which wait on outages and on Redis more than they compute
# (about one core of the two between them); the fourth slot runs cleanup
# and then the small packages in that time, and internal/overload (its
# freeze tests; its contention matrix runs alone afterwards, see ALONE)
# starts after them (at -p 3 with
# overload and cleanup fourth and fifth, they and the small packages only
# started when a provider ended, and ran until the end of the run). The
# providers' deterministic tests, most of the CPU, run after their
# sequential ones. Their timing bounds are loose (at
# least ten times the p99 measured on a loaded 2-core machine) so that one
# package's tests do not push another's over them; latency targets are
# measured by benchmarks (docs/benchmarks.md). GOGC=400: the test
# binaries' heaps are small and memory is not short, and under the race
# detector a collection is dear (8 % less CPU in redissup's miniredis
# suite). go test -json goes through
# internal/testprogress, which prints a line per package as it ends, every
# failed test's output in full, a line at least every 20 s naming what is
# still running, and the slowest packages and tests at the end. README.md
# says how long the whole target takes. The nested modules' tests go
# through testprogress too, so no step is silent for more than 20 s.
SLOWEST = ./limiter/redissup ./limiter/redisabs ./limiter/hybrid ./cleanup
# ALONE is the test that runs by itself once the packages are done: the
# contention matrix (internal/overload) judges how many decisions a busy
# client sheds, which depends on the CPU the process gets. Beside the
# providers' suites a CI machine gave its cells a fifth of the CPU they get
# alone, and 2 % of the decisions of 3 × 128 goroutines on one key were
# shed; alone (about 45 s) the most shed in any cell is under 0.1 %.
ALONE = TestContentionMatrix
TESTP = $$(( $$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2) + 2 ))
test: fmt-check vet tidy-check deps-check redis-note
	GOGC=400 $(GO) test -race -count=1 -p $(TESTP) -json -skip '^$(ALONE)$$' $(SLOWEST) ./... 2>&1 | $(GO) run ./internal/testprogress
	GOGC=400 $(GO) test -race -count=1 -json -run '^$(ALONE)$$' ./internal/overload/ 2>&1 | $(GO) run ./internal/testprogress
	(cd bench && $(GO) test -race -count=1 -json -run '^TestRateLimitHeaders(Parse|ClampedIntegers)$$' .) 2>&1 | $(GO) run ./internal/testprogress
	for m in $(NESTED_TESTED); do ( (cd $$m && $(GO) test -race -count=1 -json ./...) 2>&1 | $(GO) run ./internal/testprogress) || exit 1; done
	$(MAKE) fuzz-smoke

# Without redis-server on PATH the real-Redis tests skip themselves, which
# go test reports only under -v: say so in one line (CI sets
# SLUICE_REQUIRE_REDIS=1, under which they fail instead).
redis-note:
	@command -v redis-server >/dev/null 2>&1 || echo "make test: redis-server is not on PATH: the real-Redis tests are SKIPPED (miniredis tests still run); install redis-server, or run bash .ci/run"

# A short run of the differential fuzzers (local against miniredis) and of
# the client-address parser on every test run; `make fuzz` runs every
# fuzzer for FUZZTIME.
fuzz-smoke:
	@$(HEARTBEAT) set -x; $(GO) test -run '^$$' -fuzz '^FuzzAgainstLocal$$' -fuzztime $(FUZZSMOKE) ./limiter/redisabs/
	@$(HEARTBEAT) set -x; $(GO) test -run '^$$' -fuzz '^FuzzAgainstLocal$$' -fuzztime $(FUZZSMOKE) ./limiter/redissup/
	@$(HEARTBEAT) set -x; $(GO) test -run '^$$' -fuzz '^FuzzClientIP$$' -fuzztime $(FUZZSMOKE) ./httplimit/

# gofmt -l prints the files it would change; any output fails.
fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$out"; exit 1; fi

# The nested modules, when present, are vetted too.
vet:
	@$(HEARTBEAT) set -x; $(GO) vet ./...
	@$(HEARTBEAT) set -x; if [ -f bench/go.mod ]; then cd bench && $(GO) vet ./...; fi
	@$(HEARTBEAT) set -x; for m in $(NESTED_TESTED); do if [ -f $$m/go.mod ]; then (cd $$m && $(GO) vet ./...) || exit 1; fi; done

tidy-check:
	$(GO) mod tidy
	git diff --exit-code go.mod go.sum
	for m in $(NESTED_TESTED); do (cd $$m && $(GO) mod tidy && git diff --exit-code go.mod go.sum) || exit 1; done

# The core module depends on exactly go-redis, miniredis and x/time/rate,
# and nothing in its module graph is OpenTelemetry, gRPC, rueidis or
# valkey-go (they live in the nested sluiceotel, grpclimit and
# sluicerueidis modules).
CORE_DEPS = github.com/alicebob/miniredis/v2 github.com/redis/go-redis/v9 golang.org/x/time
deps-check:
	@direct=$$($(GO) list -m -f '{{if not (or .Main .Indirect)}}{{.Path}}{{end}}' all | sort | tr '\n' ' '); \
	want=$$(echo $(CORE_DEPS) | tr ' ' '\n' | sort | tr '\n' ' '); \
	if [ "$$direct" != "$$want" ]; then echo "deps-check: direct dependencies are: $$direct; want: $$want"; exit 1; fi
	@if $(GO) mod graph | grep -i opentelemetry; then echo "deps-check: the core module graph has OpenTelemetry"; exit 1; fi
	@if $(GO) mod graph | grep google.golang.org/grpc; then echo "deps-check: the core module graph has gRPC"; exit 1; fi
	@if $(GO) mod graph | grep -e github.com/redis/rueidis -e github.com/valkey-io; then echo "deps-check: the core module graph has rueidis or valkey-go"; exit 1; fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Runs every Fuzz target of every package for FUZZTIME each.
fuzz:
	for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done
