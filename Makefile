# ckptfs — build, test, bench.
#
#   make            build bin/ckptfs and bin/turnctl
#   make test       vet + unit and end-to-end tests (mounts FUSE: needs root and /dev/fuse)
#   make test-long  the long randomized and crash suites
#   make bench      side-by-side performance ratios (see ../shared/BENCH.md)

GO      ?= go
# -race on everything: the daemon's locking is the riskiest code we have.
TESTFLAGS ?= -race -count=1 -timeout 9m

.PHONY: all build test test-long bench lint clean

all: build

build:
	$(GO) build -o bin/ ./cmd/ckptfs ./cmd/turnctl

test: build
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

test-long: build
	CKPTFS_LONG=1 $(GO) test -count=1 -timeout 60m ./...

bench: build
	$(GO) run ./cmd/ckptfs-bench $(BENCHFLAGS)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

clean:
	rm -rf bin
