# ckptfs — build, test, bench.
#
#   make            build bin/ckptfs and bin/turnctl
#   make test       vet + unit and end-to-end tests (mounts FUSE: needs root and /dev/fuse)
#   make test-long  the long randomized and crash suites
#   make bench      side-by-side performance ratios (see doc/BENCH.md)

GO      ?= go
# -race on everything: the daemon's locking is the riskiest code we have.
TESTFLAGS ?= -race -count=1 -timeout 9m

.PHONY: all build test test-long bench lint clean

all: build

# turnctl is built without cgo: agents' hooks start it at every prompt, and
# package net (linked through pflag) would otherwise make it a dynamically
# linked binary whose libc and cgo start-up cost ~8 ms of CPU per run. It
# must stay lean in what it links too (cmd/turnctl's test checks).
# -buildvcs=auto: the binaries carry the commit they were built from
# (--version), also where the environment's GOFLAGS turns stamping off;
# in a git worktree, where the go command stamps nothing, VERSION_FLAGS
# sets it (internal/version).
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo +dirty)
GIT_TIME   := $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD 2>/dev/null)
VERSION_FLAGS := -ldflags "-X ckptfs/internal/version.Commit=$(GIT_COMMIT) -X ckptfs/internal/version.CommitTime=$(GIT_TIME)"

build:
	$(GO) build -buildvcs=auto $(VERSION_FLAGS) -o bin/ ./cmd/ckptfs
	CGO_ENABLED=0 $(GO) build -buildvcs=auto $(VERSION_FLAGS) -o bin/ ./cmd/turnctl

test: build
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

# The tests package alone takes 40-45 minutes on a quiet 2-core machine
# (the crash rounds most of it), and went past an hour under load.
test-long: build
	CKPTFS_LONG=1 $(GO) test -count=1 -timeout 120m ./...

bench: build
	$(GO) run ./cmd/ckptfs-bench $(BENCHFLAGS)

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

clean:
	rm -rf bin
