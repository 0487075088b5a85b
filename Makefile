# Flotilla: a Fleet-compatible multi-cluster hub.
#
#   make run     build and start a hub with its own embedded control plane
#   make test    everything CI runs: generated code check, unit and integration tests
#
# Tools the tests need (helm, controller-gen) are built from the Go module proxy into ./bin.

SHELL := /bin/bash
# Static binaries everywhere: the images need them, and one setting means one build cache
# for binaries, tests and images (cgo would double the ~13 minute cold build).
export CGO_ENABLED := 0
.SHELLFLAGS := -eu -o pipefail -c

BIN            := $(CURDIR)/bin
VERSION        ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
KUBE_VERSION   := v1.37.2
KUBE_MAJOR     := 1
KUBE_MINOR     := 37
HELM_VERSION   := v3.21.4
CONTROLLER_GEN_VERSION := v0.23.0
STATICCHECK_VERSION    := v0.8.2
DATA_DIR       ?= $(HOME)/.local/share/flotilla

# kube-apiserver, kubectl and Helm read the Kubernetes version from these variables;
# unstamped they say v0.0.0-master and version checks fail.
LDFLAGS := -s -w \
	-X github.com/flotilla/flotilla/pkg/version.Version=$(VERSION) \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(KUBE_MAJOR) \
	-X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=$(KUBE_MAJOR) \
	-X k8s.io/client-go/pkg/version.gitMinor=$(KUBE_MINOR)

GO_TEST_FLAGS ?=
# Integration tests start API servers (about 350 MB each) and mostly wait on them: two
# packages at a time, four tests at a time within each, fit 2 cores and 24 GiB.
INTEGRATION_PARALLEL ?= 2

# Images: named as the charts' defaults (repository flotilla/<binary>, tag = appVersion).
IMAGES_DIR       ?= $(BIN)/images
IMAGE_REPOSITORY ?= flotilla
IMAGE_TAG        ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' charts/fleet-like/hub/Chart.yaml)

.PHONY: all build run bench bench-gitrepo chaos node node-packages images image-tarballs skopeo controlplane test unit fuzz integration generate verify-generate tools helm controller-gen staticcheck lint clean

all: build

build:
	mkdir -p $(BIN)
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/hub ./cmd/hub
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/agent ./cmd/agent
	go build -o $(BIN)/bench ./cmd/bench
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/flotilla-node ./cmd/flotilla-node
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/pause ./cmd/pause

## images: OCI image tarballs of the hub and the agent in $(IMAGES_DIR), without a
## container engine (hack/images, go-containerregistry); `docker load -i` or
## `kind load image-archive` them.
images: build
	$(MAKE) --no-print-directory image-tarballs

print-image-tag:
	@echo $(IMAGE_TAG)

image-tarballs:
	cd hack/images && go run . --out $(IMAGES_DIR) --repository $(IMAGE_REPOSITORY) --tag $(IMAGE_TAG) $(BIN)/hub $(BIN)/agent $(BIN)/pause

## bench: CLUSTERS simulated agents register with a hub at once, then get a Bundle;
## prints a table and writes bench-results/bench-$(CLUSTERS).json (docs/scale.md).
CLUSTERS ?= 100
bench: build
	$(BIN)/bench --clusters $(CLUSTERS) --bin $(BIN) $(BENCH_FLAGS)

## chaos: a long chaos campaign (docs/scale.md): CHAOS_CLUSTERS simulated agents and
## CHAOS_REAL_AGENTS real ones register while CHAOS_KILLS kill -9s of each kind land
## at random moments; then the invariants. CHAOS_SEED repeats a campaign's schedule.
CHAOS_CLUSTERS ?= 200
CHAOS_REAL_AGENTS ?= 2
CHAOS_KILLS ?= 20
CHAOS_SEED ?=
chaos: build helm
	FLOTILLA_CHAOS_CLUSTERS=$(CHAOS_CLUSTERS) FLOTILLA_CHAOS_REAL_AGENTS=$(CHAOS_REAL_AGENTS) FLOTILLA_CHAOS_KILLS=$(CHAOS_KILLS) \
		FLOTILLA_CHAOS_SEED=$(CHAOS_SEED) FLOTILLA_BIN=$(BIN) PATH=$(BIN):$$PATH \
		go test -count=1 -v -parallel 1 -run '^TestChaos' -timeout 3h ./integrationtests/chaos/

## bench-gitrepo: GITREPOS GitRepos polling every 15 s against a local Git server:
## time to all Accepted, then the hub's CPU and memory over a minute (docs/gitrepo.md).
GITREPOS ?= 100
bench-gitrepo: build
	FLOTILLA_GITREPO_SCALE=$(GITREPOS) FLOTILLA_BIN=$(BIN) PATH=$(BIN):$$PATH \
		go test -count=1 -v -run '^TestManyGitReposPolling$$' -timeout 30m ./integrationtests/gitrepo/

## run: start a hub with an embedded control plane; data in $(DATA_DIR).
run: build
	$(BIN)/hub --data-dir $(DATA_DIR)

## node: a control plane with a node that runs Pods from the images make images
## builds (docs/node.md); needs root and the Debian packages node-packages installs.
node: images node-packages
	$(BIN)/hub controlplane --data-dir $(DATA_DIR)-node --secure-port 6445 --node --node-images $(IMAGES_DIR)

## node-packages: Debian's containerd, runc, CNI plugins, iptables and conntrack, which
## a node runs with; a machine without root or apt says so and the node tests skip.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables conntrack
node-packages:
	@if command -v containerd >/dev/null && command -v runc >/dev/null && [ -x /usr/lib/cni/bridge ] && command -v iptables >/dev/null && command -v conntrack >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "node-packages: not root or no apt-get; install $(NODE_PACKAGES) to run the node tests"; exit 0; fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get install -y --no-install-recommends $(NODE_PACKAGES) >/dev/null 2>&1 || \
		{ apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends $(NODE_PACKAGES) >/dev/null 2>&1; } || \
		echo "node-packages: could not install $(NODE_PACKAGES); the node tests will skip"

## controlplane: start only a control plane (a local downstream cluster to try Flotilla on).
controlplane: build
	$(BIN)/hub controlplane --data-dir $(DATA_DIR)-downstream --secure-port 6444 --simulate-workloads

## test: what CI runs: generated code check, then build and tools side by side, then tests.
test:
	$(MAKE) verify-generate
	$(MAKE) -j2 build helm
	$(MAKE) lint
	$(MAKE) unit
	$(MAKE) fuzz
	$(MAKE) integration

## fuzz: run every Go fuzz test (func Fuzz* in pkg/ and cmd/) for FUZZTIME each; CI
## runs them briefly. An input that fails is written to the package's testdata/fuzz
## and from then on runs with the unit tests: commit it with the fix.
# A number of executions ("20000x"), not a duration: a duration races Go's fuzzing
# coordinator when it ends and fails at random with "context deadline exceeded" on a
# busy machine (golang/go#75804).
FUZZTIME ?= 20000x
fuzz:
	@set -e; for file in $$(grep -rl --include='*_test.go' '^func Fuzz' pkg cmd | sort); do \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "fuzz: $$fn in ./$$(dirname $$file) for $(FUZZTIME)"; \
			go test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) ./$$(dirname $$file); \
		done; \
	done

unit:
	go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v /integrationtests)

## lint: go vet and staticcheck (its checks as staticcheck.conf sets them) on every package.
lint: staticcheck
	go vet ./...
	$(BIN)/staticcheck ./...

## integration: every integration package; the chaos campaign runs short, with a
## fixed seed (make chaos runs a long one). The real-Pod tests (integrationtests/pods)
## load the images into a node; they skip where the machine cannot run one.
integration: build tools
	$(MAKE) --no-print-directory image-tarballs
	FLOTILLA_CHAOS_SEED=$${FLOTILLA_CHAOS_SEED:-1} FLOTILLA_IMAGES=$(IMAGES_DIR) FLOTILLA_BIN=$(BIN) PATH=$(BIN):$$PATH go test $(GO_TEST_FLAGS) -p $(INTEGRATION_PARALLEL) -parallel 4 -timeout 40m ./integrationtests/...

generate: controller-gen
	go run ./hack/codegen
	$(BIN)/controller-gen crd:crdVersions=v1 paths=./pkg/apis/... output:crd:dir=./charts/fleet-like/hub/crds
	gofmt -w pkg/apis pkg/generated

## verify-generate: fail when the committed generated code differs from what generate writes.
verify-generate: generate
	@if [ -n "$$(git status --porcelain -- pkg/apis pkg/generated charts)" ]; then \
		echo "Generated code is out of date; run 'make generate' and commit:"; \
		git status --porcelain -- pkg/apis pkg/generated charts; \
		git --no-pager diff --stat -- pkg/apis pkg/generated charts; \
		exit 1; \
	fi

tools: helm controller-gen skopeo node-packages

## skopeo: a second, independent reader of the image tarballs for the images test
## (Debian's package; the test checks the digests itself when it is missing).
skopeo:
	@command -v skopeo >/dev/null || apt-get install -y --no-install-recommends skopeo >/dev/null 2>&1 || \
		echo "skopeo could not be installed; the images test checks the archives itself"

helm: $(BIN)/helm
$(BIN)/helm:
	GOBIN=$(BIN) go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

staticcheck: $(BIN)/staticcheck
$(BIN)/staticcheck:
	GOBIN=$(BIN) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

controller-gen: $(BIN)/controller-gen
$(BIN)/controller-gen:
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

clean:
	rm -rf $(BIN)
