# make test is what CI runs (.ci/run). POSIX make; recipes use /bin/sh.

GO ?= go
FUZZTIME ?= 30s

FUZZSMOKE ?= 10s

.PHONY: test fmt-check vet tidy-check bench fuzz fuzz-smoke

test: fmt-check vet tidy-check
	$(GO) test -race -count=1 ./...
	cd bench && $(GO) test -race -count=1 -run '^TestRateLimitHeadersParse$$' .
	$(MAKE) fuzz-smoke

# A short run of the differential fuzzers (local against miniredis) and of
# the client-address parser on every test run; `make fuzz` runs every
# fuzzer for FUZZTIME.
fuzz-smoke:
	$(GO) test -run '^$$' -fuzz '^FuzzAgainstLocal$$' -fuzztime $(FUZZSMOKE) ./limiter/redisabs/
	$(GO) test -run '^$$' -fuzz '^FuzzAgainstLocal$$' -fuzztime $(FUZZSMOKE) ./limiter/redissup/
	$(GO) test -run '^$$' -fuzz '^FuzzClientIP$$' -fuzztime $(FUZZSMOKE) ./httplimit/

# gofmt -l prints the files it would change; any output fails.
fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$out"; exit 1; fi

# The nested bench/ module, when present, is vetted too.
vet:
	$(GO) vet ./...
	if [ -f bench/go.mod ]; then cd bench && $(GO) vet ./...; fi

tidy-check:
	$(GO) mod tidy
	git diff --exit-code go.mod go.sum

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Runs every Fuzz target of every package for FUZZTIME each.
fuzz:
	for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done
