# make test is what CI runs (.ci/run). POSIX make; recipes use /bin/sh.

GO ?= go
FUZZTIME ?= 30s

.PHONY: test fmt-check vet tidy-check bench fuzz

test: fmt-check vet tidy-check
	$(GO) test -race -count=1 ./...

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
