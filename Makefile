# credwatch: build, generate, verify and test.
# `make test` is the one command that runs every test on a fresh machine: it builds the envtest
# control plane (kube-apiserver and etcd) from the Go module proxy on first use, regenerates the
# CRDs, deepcopy and RBAC and fails if they were stale, runs golangci-lint (built from
# hack/golangci-lint), then vets and tests.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

GO ?= go
BIN := $(CURDIR)/bin
HELM_DOCS := $(BIN)/helm-docs
CRD_REF_DOCS := $(BIN)/crd-ref-docs
ENVTEST_ASSETS := $(BIN)/k8s
CONTROLLER_GEN := $(GO) tool controller-gen
# Set here, not by its rule below, because `verify` and `lint` name it as a prerequisite before that.
GOLANGCI_LINT := $(BIN)/golangci-lint

.PHONY: all
all: build

##@ Generate

.PHONY: manifests
manifests: ## Generate the CRDs and the manager's RBAC role from the Go markers; the chart ships the same CRDs.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd paths="./..." output:crd:artifacts:config=config/crd/bases
	cp config/crd/bases/*.yaml charts/credwatch/crds/

.PHONY: generate
generate: ## Generate the DeepCopy methods of the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

##@ Check

.PHONY: fmt
fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: verify
verify: $(GOLANGCI_LINT) $(HELM_DOCS) $(CRD_REF_DOCS) ## Fail if formatting, the generated CRDs, deepcopy, RBAC, chart README and API reference, or golangci-lint find fault.
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	@before=$$(mktemp -d) && cp -r api config charts docs "$$before" && \
	$(MAKE) --no-print-directory manifests generate chart-docs api-docs && \
	if ! diff -ru "$$before/api" api || ! diff -ru "$$before/config" config || ! diff -ru "$$before/charts" charts || ! diff -ru "$$before/docs" docs; then \
		rm -rf "$$before"; echo "Generated files were stale (regenerated now: review and commit them)"; exit 1; fi; \
	rm -rf "$$before"
	$(GOLANGCI_LINT) run --allow-serial-runners ./...
	cd hack/image && $(GOLANGCI_LINT) run --allow-serial-runners -c $(CURDIR)/.golangci.yml ./...

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint with the linters and thresholds in .golangci.yml.
	$(GOLANGCI_LINT) run --allow-serial-runners ./...
	cd hack/image && $(GOLANGCI_LINT) run --allow-serial-runners -c $(CURDIR)/.golangci.yml ./...

##@ Test

# -timeout: the stories on real nodes may take up to their own budgets (about 26 minutes in all);
# Go's default of 10 panics the test binary, which skips the cluster's teardown.
.PHONY: test
test: verify vet envtest mailpit helm promtool cluster image docs-packages ## Run every test, against a real kube-apiserver, etcd and SMTP server, a cluster of real nodes, and the documentation site in Chromium.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) MAILPIT_BIN=$(MAILPIT) HELM_BIN=$(HELM) PROMTOOL_BIN=$(PROMTOOL) ARTIFACTS=$(ARTIFACTS) \
	CLUSTER_ASSETS=$(ENVTEST_ASSETS) CLUSTER_IMAGES=$(CLUSTER_IMAGES) REGISTRY_BIN=$(REGISTRY) CREDENTIAL_PROVIDERS=$(CREDENTIAL_PROVIDERS) \
	CREDWATCH_IMAGE=$(BIN)/credwatch-image.tar \
	$(GO) test ./... -count=1 -timeout 30m
	cd hack/image && $(GO) test ./... -count=1

# What tests keep for a person to look at afterwards, such as the screenshot of Getting started
# (bin/artifacts/docs/getting-started.png).
ARTIFACTS ?= $(BIN)/artifacts

.PHONY: unit
unit: ## Run the fast tier: unit tests with fakes, no API server, SMTP server or helm (well under a minute warm).
	$(GO) test -short ./... -count=1

.PHONY: envtest
envtest: $(ENVTEST_ASSETS)/kube-apiserver $(ENVTEST_ASSETS)/etcd ## Build the envtest control plane.

# PROGRESS turns `go build -v`'s list of packages into a line every hundred, so a first build
# that takes minutes shows it is moving; compiler errors pass through whole.
PROGRESS := awk '/^\#|:[0-9]+:[0-9]+: / {print; next} {n++; if (n % 100 == 0) printf "  ... %d packages compiled\n", n; fflush()}'

# The version kube-apiserver reports, which `go build` cannot stamp from a module as the
# Kubernetes release scripts do from git. Kept in step with hack/envtest/go.mod.
KUBE_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" {print $$2}' hack/envtest/go.mod)
KUBE_VERSION_LDFLAGS := -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(subst v, ,$(KUBE_VERSION)))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) \
	-X k8s.io/component-base/version.gitTreeState=clean

# Prebuilt envtest binaries cannot be downloaded here, so they are built from the module pinned in
# hack/envtest. The first build takes minutes; later ones reuse bin/ and Go's build cache.
$(ENVTEST_ASSETS)/kube-apiserver: hack/envtest/go.mod hack/envtest/go.sum
	@echo "Building kube-apiserver for envtest (the first build takes several minutes)..."
	cd hack/envtest && $(GO) build -v -ldflags "$(KUBE_VERSION_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kube-apiserver 2>&1 | $(PROGRESS)

$(ENVTEST_ASSETS)/etcd: hack/envtest/go.mod hack/envtest/go.sum
	@echo "Building etcd for envtest..."
	cd hack/envtest && $(GO) build -v -o $@ go.etcd.io/etcd/server/v3 2>&1 | $(PROGRESS)

# The test cluster's node and controller binaries (test/cluster), built from the same pinned
# release as kube-apiserver: a few minutes more on a first build.
CLUSTER_BINARIES := $(addprefix $(ENVTEST_ASSETS)/,kubelet kube-proxy kube-controller-manager kube-scheduler)
# The images every node of the test cluster imports: no image can be pulled on the test machines.
CLUSTER_IMAGES := $(BIN)/images
PAUSE_IMAGE := localhost/credwatch/pause:test

# The registry the nodes pull from, and the credential provider AKS's kubelets pull with.
REGISTRY := $(BIN)/registry
REGISTRY_VERSION := $(shell awk '$$1 == "github.com/distribution/distribution/v3" {print $$2}' hack/registry/go.mod)
CREDENTIAL_PROVIDERS := $(BIN)/credential-providers

.PHONY: cluster
cluster: envtest $(CLUSTER_BINARIES) $(CLUSTER_IMAGES)/pause.tar $(REGISTRY) $(CREDENTIAL_PROVIDERS)/acr-credential-provider cluster-packages ## Build the test cluster's binaries, images, registry and credential provider, and install containerd, runc, the CNI plugins and iptables (as root).

$(REGISTRY): hack/registry/go.mod hack/registry/go.sum
	@echo "Building the registry (distribution $(REGISTRY_VERSION)) for the test cluster..."
	cd hack/registry && $(GO) build -v -ldflags "-X github.com/distribution/distribution/v3/version.version=$(REGISTRY_VERSION)" -o $@ github.com/distribution/distribution/v3/cmd/registry 2>&1 | $(PROGRESS)

$(CREDENTIAL_PROVIDERS)/acr-credential-provider: hack/acr-credential-provider/go.mod hack/acr-credential-provider/go.sum
	@echo "Building acr-credential-provider for the test cluster's kubelets..."
	cd hack/acr-credential-provider && $(GO) build -v -o $@ sigs.k8s.io/cloud-provider-azure/cmd/acr-credential-provider 2>&1 | $(PROGRESS)

$(CLUSTER_BINARIES): $(ENVTEST_ASSETS)/%: hack/envtest/go.mod hack/envtest/go.sum
	@echo "Building $* for the test cluster..."
	cd hack/envtest && $(GO) build -v -ldflags "$(KUBE_VERSION_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/$* 2>&1 | $(PROGRESS)

$(CLUSTER_IMAGES)/pause.tar: test/cluster/pause/main.go $(wildcard hack/image/*.go) hack/image/go.mod
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(CLUSTER_IMAGES)/pause ./test/cluster/pause
	cd hack/image && $(GO) run . -binary $(CLUSTER_IMAGES)/pause -ca-certs "" -tag $(PAUSE_IMAGE) -out $@

# The test cluster runs as root, as the test machines do: it makes network namespaces, mounts
# and cgroups. The runtime comes from the machine's Debian packages, installed here when missing.
.PHONY: cluster-packages
cluster-packages:
	@if [ "$$(id -u)" != 0 ]; then echo "The test cluster (make test, make demo-cluster) needs root: it makes network namespaces, mounts and cgroups."; exit 1; fi
	@missing=; for c in containerd containerd-shim-runc-v2 runc ctr iptables conntrack nsenter; do command -v $$c >/dev/null || missing=yes; done; \
	[ -x /usr/lib/cni/bridge ] || missing=yes; \
	if [ -n "$$missing" ]; then \
		echo "Installing containerd, runc, the CNI plugins, iptables and conntrack from Debian's packages..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends containerd runc containernetworking-plugins iptables conntrack; \
	fi

# The email channel is tested against a real SMTP server, mailpit, built from the module pinned in
# hack/mailpit. Its version is stamped as its release builds do, or it reports "dev".
MAILPIT := $(BIN)/mailpit
MAILPIT_VERSION := $(shell awk '$$1 == "github.com/axllent/mailpit" {print $$2}' hack/mailpit/go.mod)

.PHONY: mailpit
mailpit: $(MAILPIT) ## Build the mailpit SMTP server the email tests deliver to.

$(MAILPIT): hack/mailpit/go.mod hack/mailpit/go.sum
	@echo "Building mailpit $(MAILPIT_VERSION) for the email tests..."
	cd hack/mailpit && $(GO) build -v -ldflags "-X github.com/axllent/mailpit/config.Version=$(MAILPIT_VERSION)" -o $@ github.com/axllent/mailpit 2>&1 | $(PROGRESS)

# helm, to lint and render the chart in its tests, built from the module pinned in hack/helm.
HELM := $(BIN)/helm
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v3" {print $$2}' hack/helm/go.mod)

.PHONY: helm
helm: $(HELM) ## Build helm for the chart's tests.

$(HELM): hack/helm/go.mod hack/helm/go.sum
	@echo "Building helm $(HELM_VERSION) for the chart tests..."
	cd hack/helm && $(GO) build -v -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" -o $@ helm.sh/helm/v3/cmd/helm 2>&1 | $(PROGRESS)

# crd-ref-docs (CRD_REF_DOCS, set at the top), to write the API reference from the CRDs' Go types,
# built from the module pinned in hack/crdrefdocs.
$(CRD_REF_DOCS): hack/crdrefdocs/go.mod hack/crdrefdocs/go.sum
	@echo "Building crd-ref-docs for the API reference..."
	cd hack/crdrefdocs && $(GO) build -v -o $@ github.com/elastic/crd-ref-docs 2>&1 | $(PROGRESS)

.PHONY: api-docs
api-docs: $(CRD_REF_DOCS) ## Write docs/api.md, the API reference, from the Go types in api/.
	$(CRD_REF_DOCS) --source-path=./api --config=hack/crdrefdocs/config.yaml --renderer=markdown --max-depth=20 \
		--output-path=docs/api.md --log-level=ERROR

# helm-docs (HELM_DOCS, set at the top), to write the chart's README from the comments of its
# values, built from the module pinned in hack/helmdocs.
$(HELM_DOCS): hack/helmdocs/go.mod hack/helmdocs/go.sum
	@echo "Building helm-docs for the chart's README..."
	cd hack/helmdocs && $(GO) build -v -o $@ github.com/norwoodj/helm-docs/cmd/helm-docs 2>&1 | $(PROGRESS)

.PHONY: chart-docs
chart-docs: $(HELM_DOCS) ## Write charts/credwatch/README.md from the comments of values.yaml.
	$(HELM_DOCS) --chart-search-root charts --log-level warning

# The documentation site: mkdocs with the Material theme, and Chromium for its test, from Debian
# bookworm's packages (mkdocs 1.4.2, mkdocs-material 8.2.5, chromium), installed here when missing.
.PHONY: docs-packages
docs-packages:
	@if ! command -v mkdocs >/dev/null || [ ! -d /usr/share/mkdocs/themes/material ] || ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" != 0 ]; then echo "mkdocs, mkdocs-material and chromium are missing: run make docs-packages as root, or apt-get install mkdocs mkdocs-material chromium"; exit 1; fi; \
		echo "Installing mkdocs, mkdocs-material and chromium from Debian's packages..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mkdocs mkdocs-material chromium; \
	fi

.PHONY: docs
docs: docs-packages ## Build the documentation site from docs/ into bin/site, failing on any warning (a broken link, a page missing from the nav).
	mkdocs build --strict

.PHONY: docs-serve
docs-serve: docs-packages ## Serve the documentation site at http://127.0.0.1:8000, rebuilt as docs/ changes.
	mkdocs serve --strict --dev-addr 127.0.0.1:8000

# promtool, to check and unit-test the chart's alert rules and to check the operator's metrics,
# built from the module pinned in hack/promtool. Prometheus 3.x is published as module v0.3xx.y
# (3.16.0 is v0.316.0): the version is stamped as its release builds do, as 3.x.y.
PROMTOOL := $(BIN)/promtool
PROMTOOL_MODULE := $(shell awk '$$1 == "github.com/prometheus/prometheus" {print $$2}' hack/promtool/go.mod)
PROMTOOL_VERSION := $(shell echo $(PROMTOOL_MODULE) | sed -E 's/^v0\.3(0?)([0-9]+)\.([0-9]+)$$/3.\2.\3/')

.PHONY: promtool
promtool: $(PROMTOOL) ## Build promtool for the alert rules' and the metrics' tests.

$(PROMTOOL): hack/promtool/go.mod hack/promtool/go.sum
	@echo "Building promtool $(PROMTOOL_VERSION) for the alert rules' tests (the first build takes a few minutes)..."
	cd hack/promtool && $(GO) build -v -ldflags "-X github.com/prometheus/common/version.Version=$(PROMTOOL_VERSION)" -o $@ github.com/prometheus/prometheus/cmd/promtool 2>&1 | $(PROGRESS)

# golangci-lint, with the linters .golangci.yml chooses, built from the module pinned in
# hack/golangci-lint. Its main package keeps the stamped version only if a date is stamped too
# (otherwise it reports the main module's "(devel)"), so both are, as its release builds do: the
# version without its "v", and the date the module proxy gives for the release.
GOLANGCI_LINT_VERSION := $(shell awk '$$1 == "github.com/golangci/golangci-lint/v2" {print $$2}' hack/golangci-lint/go.mod)

$(GOLANGCI_LINT): hack/golangci-lint/go.mod hack/golangci-lint/go.sum
	@echo "Building golangci-lint $(GOLANGCI_LINT_VERSION) (the first build takes a few minutes)..."
	cd hack/golangci-lint && \
	date=$$($(GO) list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' github.com/golangci/golangci-lint/v2) && \
	$(GO) build -v -ldflags "-X main.version=$(GOLANGCI_LINT_VERSION:v%=%) -X main.date=$$date" -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint 2>&1 | $(PROGRESS)

##@ Run

.PHONY: demo
demo: envtest mailpit ## Run credwatch on a local control plane against the Azure fakes, and show what it does (Ctrl-C stops).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) MAILPIT_BIN=$(MAILPIT) $(GO) run ./test/demo

.PHONY: demo-cluster
demo-cluster: envtest mailpit helm cluster image ## As root: play the seed's outage and its healing on a two-node cluster with the chart installed, and keep it up until Ctrl-C, which removes it.
	$(GO) test -c -o $(BIN)/demo-cluster ./test/nodes
	@status=0; cd test/nodes && CREDWATCH_DEMO_CLUSTER=1 MAILPIT_BIN=$(MAILPIT) HELM_BIN=$(HELM) \
	CLUSTER_ASSETS=$(ENVTEST_ASSETS) CLUSTER_IMAGES=$(CLUSTER_IMAGES) REGISTRY_BIN=$(REGISTRY) CREDENTIAL_PROVIDERS=$(CREDENTIAL_PROVIDERS) \
	CREDWATCH_IMAGE=$(BIN)/credwatch-image.tar $(BIN)/demo-cluster -test.run '^TestExpiredClusterSecretIsTheOutage$$' -test.timeout 0 || status=$$?; \
	case $$status in 0|130|143) ;; *) exit $$status ;; esac

# BENCH_WATCHES are the numbers of watches the manager's sweep is measured with; 100000 takes
# about forty minutes on two cores: make bench BENCH_WATCHES=100000 BENCH=ManagerSweep
BENCH_WATCHES ?= 100,1000,10000
# BENCH_DIGEST_APPS is the tenant the owner digests are measured with, owned five applications to
# an owner: make bench BENCH_DIGEST_APPS=100000 BENCH=OwnerDigests
BENCH_DIGEST_APPS ?= 10000
BENCH ?= .

.PHONY: bench
bench: envtest mailpit ## Measure sweeps of 100, 1,000 and 10,000 watches against Graph's throttling budget, the Graph path alone, tenant scans, owner digests and the whole manager (about twenty minutes).
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) MAILPIT_BIN=$(MAILPIT) CREDWATCH_BENCH_WATCHES=$(BENCH_WATCHES) CREDWATCH_BENCH_DIGEST_APPS=$(BENCH_DIGEST_APPS) $(GO) test ./test/scale -run '^$$' -bench '$(BENCH)' -benchtime=1x -timeout 180m
	$(GO) test ./internal/metrics -run '^$$' -bench '$(BENCH)' -benchmem

##@ Build

.PHONY: build
build: ## Build the manager binary and the kubectl plugin.
	$(GO) build -o $(BIN)/credwatch ./cmd
	$(GO) build -o $(BIN)/kubectl-credwatch ./cmd/kubectl-credwatch

IMG ?= ghcr.io/credwatch/credwatch:latest

.PHONY: image
image: ## Write the operator's image IMG to bin/credwatch-image.tar, for `ctr images import` or `docker load`; needs no container engine.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/image/credwatch ./cmd
	cd hack/image && $(GO) run . -binary $(BIN)/image/credwatch -tag $(IMG) -out $(BIN)/credwatch-image.tar

.PHONY: docker-build
docker-build: ## Build the operator's image IMG with a Docker engine (the same image as `make image`).
	docker build -t $(IMG) .

.PHONY: deploy
deploy: ## Install the CRD and the manager into the current kubectl context, with image IMG.
	cd config/manager && kubectl kustomize . >/dev/null
	kubectl kustomize config/default | sed 's|ghcr.io/credwatch/credwatch:latest|$(IMG)|' | kubectl apply -f -

.PHONY: undeploy
undeploy: ## Remove what deploy installed.
	kubectl kustomize config/default | kubectl delete --ignore-not-found -f -

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
