package controllers

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/egress"
	"github.com/credwatch/credwatch/internal/graph/msgraph"
	"github.com/credwatch/credwatch/internal/graph/planner"
	"github.com/credwatch/credwatch/test/fakegraph"
	"github.com/credwatch/credwatch/test/fakekeyvault"
)

// The suite runs one real kube-apiserver and etcd, and one Graph fake, for every test.
var (
	cfg        *rest.Config
	k8s        client.Client
	scheme     = runtime.NewScheme()
	fake       *fakegraph.Server
	identities *azure.Identities
	// graphAPI is the operator's read path: msgraph's client behind the read planner.
	graphAPI *planner.Graph
	// graphReader is msgraph's client, for a story's own planner.
	graphReader *msgraph.Client
)

// localPeers lets the channels a story's watch names reach the webhook receivers and mailpit,
// which listen on loopback, as --alert-destinations-allow=127.0.0.0/8 would.
var localPeers = egress.Policy{Allow: egress.Prefixes{netip.MustParsePrefix("127.0.0.0/8")}}

// planWindow is how long the stories' planned reads wait for others: short, since a story's
// watches are few and each waits on its answer.
const planWindow = 10 * time.Millisecond

const (
	tenantID         = "7a3c5b9e-1f2d-4e6a-8b0c-9d1e2f3a4b5c"
	operatorClientID = "0e4d2c1b-9a8f-4e7d-b6c5-a4b3c2d1e0f9"
	operatorSecret   = "op~SECRET-value-0123456789abcdefghij"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The fast tier: the unit tests run, the stories below skip, and nothing is started.
		os.Exit(m.Run())
	}
	os.Exit(runSuite(m))
}

// needsAPIServer skips a test of the envtest tier under -short, where no API server runs.
func needsAPIServer(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the envtest API server and the Graph fake: skipped under -short")
	}
}

func runSuite(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds kube-apiserver and etcd into bin/k8s")
		return 1
	}
	ctrl.SetLogger(logr.Discard())
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	var err error
	if cfg, err = env.Start(); err != nil {
		// The control plane may be up and a CRD refused: what started is stopped.
		_ = env.Stop()
		fmt.Fprintf(os.Stderr, "starting envtest: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		panic(err)
	}

	fake = fakegraph.New()
	defer fake.Close()
	fake.AddClient(tenantID, operatorClientID, operatorSecret)
	cloud := azure.Cloud{AuthorityHost: fake.URL() + "/", GraphEndpoint: fake.URL(), ARMEndpoint: "https://management.azure.com", ARMAudience: "https://management.core.windows.net/"}
	transport := fake.Client().Transport
	identities = azure.NewIdentities(cloud, fake.Client(), func(tenant string) (azcore.TokenCredential, error) {
		return operatorStandIn(cloud).Credential(azure.ClientSecret(tenant, operatorClientID, operatorSecret))
	})
	graphClient, err := msgraph.New(cloud.GraphEndpoint, transport)
	if err != nil {
		panic(err)
	}
	graphAPI = planner.NewGraph(graphClient, clock.RealClock{}, planWindow)
	graphReader = graphClient
	if err := createSignedIn(context.Background(), operatorIdentity()); err != nil {
		fmt.Fprintf(os.Stderr, "creating the suite's identity: %v\n", err)
		return 1
	}
	return m.Run()
}

// testIdentity names the ClusterAzureIdentity the suite's watches use unless they name another.
const testIdentity = "test-operator"

// scanTenant is the tenant TestTenantScan fills with applications.
const scanTenant = "26d4064c-5b68-4158-8c2b-818d1fda473c"

// hygieneTenant is the tenant TestTenantScanFindings fills with applications.
const hygieneTenant = "5a0b7c3e-91d2-4e6f-a8b4-c2d0e6f19a37"

// digestTenant is the tenant TestOwnerDigests fills with applications and owners.
const digestTenant = "8c1d2e3f-4a5b-4c6d-9e7f-8a9b0c1d2e3f"

// lateTenant is the tenant TestOwnerDigestsLate fills.
const lateTenant = "9d2e3f40-5b6c-4d7e-8f90-a1b2c3d4e5f6"

// usageTenant is the tenant whose sign-in report a tenant scan reads.
const usageTenant = "ae3f4051-6c7d-4e8f-90a1-b2c3d4e5f607"

// testSubscription is the subscription of the suite's AKS clusters.
const testSubscription = "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918"

// operatorIdentity is the operator's own identity, allowing everything the suite's watches do,
// in every namespace: the stories that are not about access run as before identities existed.
func operatorIdentity() *v1alpha1.ClusterAzureIdentity {
	return &v1alpha1.ClusterAzureIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: testIdentity},
		Spec: v1alpha1.ClusterAzureIdentitySpec{
			IdentitySpec: v1alpha1.IdentitySpec{
				Operator: &v1alpha1.OperatorSignIn{},
				Allow: v1alpha1.IdentityAllow{
					Tenants:       []string{tenantID, unitTenant, scanTenant, hygieneTenant, digestTenant, lateTenant, usageTenant, deltaTenant, deltaScanTenant, lockedScanTenant},
					Applications:  []string{v1alpha1.AllApplications},
					Subscriptions: []v1alpha1.SubscriptionScope{{SubscriptionID: testSubscription}},
					Operations: []v1alpha1.Operation{v1alpha1.OperationRotate, v1alpha1.OperationResetCluster,
						v1alpha1.OperationTenantScan, v1alpha1.OperationReadOwners, v1alpha1.OperationReadSignIns, v1alpha1.OperationReadAuditLog,
						v1alpha1.OperationPublishKeyVault, v1alpha1.OperationPublishGitHub},
					KeyVaults: []string{fakekeyvault.URL},
				},
			},
			Conditions: []v1alpha1.NamespaceCondition{{NamespaceSelector: &metav1.LabelSelector{}}},
		},
	}
}

// signedIn marks an identity's status as its controller would after a sign-in.
func signedIn(generation int64) v1alpha1.IdentityStatus {
	return v1alpha1.IdentityStatus{ObservedGeneration: generation, SignIn: "Operator", Conditions: []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignedIn, Message: "signed in",
		ObservedGeneration: generation, LastTransitionTime: metav1.Now(),
	}}}
}

// createSignedIn creates id in the API server, signed in, without its controller.
func createSignedIn(ctx context.Context, id *v1alpha1.ClusterAzureIdentity) error {
	if err := k8s.Create(ctx, id); err != nil {
		return err
	}
	id.Status = signedIn(id.Generation)
	return k8s.Status().Update(ctx, id)
}

// updateSignedIn writes id's spec, and its status as its controller would after signing in again.
func updateSignedIn(ctx context.Context, id *v1alpha1.ClusterAzureIdentity) error {
	if err := k8s.Update(ctx, id); err != nil {
		return err
	}
	id.Status = signedIn(id.Generation)
	return k8s.Status().Update(ctx, id)
}

// operatorStandIn signs in as the operator's identity would in a cluster, through the fake's
// token endpoint instead of workload identity.
func operatorStandIn(cloud azure.Cloud) *azure.Identities {
	return azure.NewIdentities(cloud, fake.Client(), nil)
}

// newNamespace gives each test its own namespace, so that tests cannot see each other's objects.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cw-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// logBuffer captures what the reconciler logs, so tests can read it back.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.b.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 2})
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
