# quotad — run `make help` for the targets.

GO       ?= go
BIN      ?= bin/quotad
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
PGHOST   ?= 127.0.0.1
PGUSER   ?= postgres
# Tests use this server, each test in a fresh schema. Override it, or unset it
# to have the tests start PostgreSQL with testcontainers (needs Docker).
QUOTAD_TEST_DATABASE_URL ?= postgres://$(PGUSER)@$(PGHOST):5432/postgres?sslmode=disable
export QUOTAD_TEST_DATABASE_URL
# Tests of short windows in Redis use this server, each test under a key
# prefix of its own. Unset it to have them start Redis with testcontainers.
QUOTAD_TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
export QUOTAD_TEST_REDIS_URL

.PHONY: help run build test cover fuzz bench bench-micro simulate fmt tidy lint vuln ci clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'
	@echo
	@echo "make bench takes BENCH_CONC=64 BENCH_DURATION=8s BENCH_WARMUP=2s BENCH_ROUNDS=2,"
	@echo "BENCH_SCENARIOS=\"mixed short hot mixed-request-id mixed-2proc short-redis mixed-redis mixed-redis-2proc reserve-commit items credits subjects entitlements\""
	@echo "(a subset runs only those; the *-redis ones need redis-cli and a Redis at"
	@echo "BENCH_REDIS_URL=redis://127.0.0.1:6379/0, their keys under BENCH_REDIS_PREFIX=bench:,"
	@echo "deleted when the run starts and ends; cold, longtail, sparse and upsert are not in"
	@echo "the default: the first three restart quotad and check unprimed customers, upsert"
	@echo "sends sparse's load to a one-commit-per-check server, see docs/benchmarks.md),"
	@echo "BENCH_KEYS=10000 (customers per set), BENCH_LONGTAIL_KEYS=100000 (longtail's, Zipf 1.1),"
	@echo "BENCH_SUBJECT_KEYS=100000 (subjects' end users, 100 per customer, Zipf 1.1),"
	@echo "BENCH_SPARSE_KEYS=1000000 (sparse's, bulk-inserted; it reports quotad's bytes per customer),"
	@echo "grpc, not in the default either, measures mixed's checks over Envoy's gRPC rate limit service"
	@echo "against quotad's HTTP check on the same process (BENCH_SCENARIOS=\"mixed grpc\"),"
	@echo "BENCH_CLIENT=net/http (or raw: a cheaper load generator, see scripts/bench.sh),"
	@echo "BENCH_ALGORITHM=token_bucket (the short windows' algorithm; sliding_window by default)"
	@echo "and PROFILE=1 (CPU profiles of quotad into bin/profiles) or BENCH_PROFILE=dir."
	@echo "make simulate takes SIMULATE_ARGS, the flags of quotasim (see go run ./cmd/quotasim -h)."

# make run's database: QUOTAD_DATABASE_URL when it is set, else database
# quotad on the local PostgreSQL (quotad's own default). quotad reads
# QUOTAD_LISTEN, and every other QUOTAD_* variable, from the environment.
RUN_DATABASE_URL = $(or $(QUOTAD_DATABASE_URL),postgres://$(PGUSER)@$(PGHOST):5432/quotad?sslmode=disable)

run: build ## start quotad on $QUOTAD_LISTEN (default 127.0.0.1:8080) against $QUOTAD_DATABASE_URL (default database quotad on the local PostgreSQL), creating the database if missing
	@sh scripts/createdb.sh '$(RUN_DATABASE_URL)'
	QUOTAD_DATABASE_URL='$(RUN_DATABASE_URL)' ./$(BIN)

build: ## build quotad, quotactl and quotasim into bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/quotad
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/quotactl ./cmd/quotactl
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/quotasim ./cmd/quotasim

# Both modules' tests run even when the main module's fail, so that one
# run shows every failure; the target fails at the end if either did.
# -timeout bounds a package's run: cmd/quotad takes about 3 minutes on an
# idle 2-core machine and several times that beside other work, where go
# test's default of 10 minutes would cut it short.
test: ## run every test with the race detector (the client module's too, whatever the first module's result)
	@failed=; \
	echo '$(GO) test -race -count=1 -timeout 40m ./...'; \
	$(GO) test -race -count=1 -timeout 40m ./... || failed="$$failed main"; \
	echo 'cd client && $(GO) test -race -count=1 -timeout 40m ./...'; \
	(cd client && $(GO) test -race -count=1 -timeout 40m ./...) || failed="$$failed client"; \
	if [ -n "$$failed" ]; then echo "make test: the tests of these modules failed:$$failed"; exit 1; fi

cover: ## run the tests and report coverage (of the main module, then of the client module)
	$(GO) test -count=1 -coverprofile=cover.out ./... && $(GO) tool cover -func=cover.out | tail -1
	cd client && $(GO) test -count=1 -coverprofile=../cover-client.out ./... && $(GO) tool cover -func=../cover-client.out | tail -1

# Fuzzing is bounded by a count of inputs, not a duration: Go 1.26 can fail a
# duration-bounded run with a spurious "context deadline exceeded"
# (golang/go#75804).
FUZZ_EXECS ?= 200000
# Each input of FuzzAgreesWithInProcess is 80 operations through Redis.
REDIS_FUZZ_EXECS ?= 3000

fuzz: ## fuzz request decoding, the check answer, window arithmetic, shared state and catalog files (FUZZ_EXECS inputs each)
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZ_EXECS)x ./internal/api/
	$(GO) test -run '^$$' -fuzz '^FuzzFastDecodeCall$$' -fuzztime $(FUZZ_EXECS)x ./internal/api/
	$(GO) test -run '^$$' -fuzz '^FuzzAppendCheckAnswer$$' -fuzztime $(FUZZ_EXECS)x ./internal/api/
	$(GO) test -run '^$$' -fuzz '^FuzzSlidingWindow$$' -fuzztime $(FUZZ_EXECS)x ./internal/quota/
	$(GO) test -run '^$$' -fuzz '^FuzzAlgorithms$$' -fuzztime $(FUZZ_EXECS)x ./internal/quota/
	$(GO) test -run '^$$' -fuzz '^FuzzSharedState$$' -fuzztime $(FUZZ_EXECS)x ./internal/quota/
	$(GO) test -run '^$$' -fuzz '^FuzzAgreesWithInProcess$$' -fuzztime $(REDIS_FUZZ_EXECS)x ./internal/redisstore/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZ_EXECS)x ./internal/catalogfile/

# Load runs need the local PostgreSQL (as for make run), and redis-cli and
# a Redis for the *-redis scenarios; they take about 7 minutes with the
# defaults. cold, longtail and sparse (not in the default list) add about
# 4 to 5 minutes at the default durations and rounds, upsert about 2
# more; sparse reads quotad's
# memory in /proc (Linux). The variables are listed by make help and at the
# top of scripts/bench.sh.
bench: ## measure POST /v1/check against a bare echo baseline under load, print ratios
	GO=$(GO) PGHOST=$(PGHOST) PGUSER=$(PGUSER) scripts/bench.sh

bench-micro: ## run the micro-benchmarks of the quota engine and the API
	$(GO) test -run '^$$' -bench . -benchmem ./internal/quota/... ./internal/api/...

# quotasim's flags for make simulate; docs/accuracy.md lists the
# workloads it was run with.
SIMULATE_ARGS ?= -workload onoff -load 1 -limit 100 -customers 10 -duration 10m -seed 1

simulate: ## replay a workload through the short-window algorithms and report how far each strays from the exact window (SIMULATE_ARGS)
	$(GO) run ./cmd/quotasim $(SIMULATE_ARGS)

fmt: ## fail if any file is not gofmt-ed
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy: ## fail if go.mod or go.sum (of any module: the main one, client, tools/envoyratelimit) are not tidy
	$(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd client && $(GO) mod tidy && git diff --exit-code go.mod
	@test ! -e client/go.sum || { echo "client/go.sum: the client module must need nothing but the standard library"; exit 1; }
	cd tools/envoyratelimit && $(GO) mod tidy && git diff --exit-code go.mod go.sum

lint: ## go vet and staticcheck, of both modules
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd client && $(GO) vet ./...
	cd client && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

vuln: ## govulncheck (needs the vulnerability database online)
	$(GO) run golang.org/x/vuln/cmd/govulncheck@v1.8.0 ./...
	cd client && $(GO) run golang.org/x/vuln/cmd/govulncheck@v1.8.0 ./...

ci: fmt tidy lint test ## everything CI checks

clean: ## remove build output
	rm -rf bin cover.out cover-client.out
