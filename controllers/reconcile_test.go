package controllers

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/access"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/azure"
	"github.com/credwatch/credwatch/internal/azure/azurefake"
	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/notify/email"
	"github.com/credwatch/credwatch/internal/policy"
	"github.com/credwatch/credwatch/internal/rotation/pacing"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// The unit tier: the reconciler against controller-runtime's fake client and func-field fakes of
// Azure and the channels, on a fake clock. These run under -short, in milliseconds; the stories
// against a real API server and the Graph fake are in the other files.

var _ Azure = &azurefake.Azure{}

// noChannels is a watch's channels when it has none.
type noChannels struct{}

func (noChannels) For(context.Context, *v1alpha1.CredentialWatch, access.Identity) (channels.Set, error) {
	return nil, nil
}
func (noChannels) NotifiesOwners(*v1alpha1.CredentialWatch, access.Identity) bool { return false }
func (noChannels) Digests(context.Context, *v1alpha1.CredentialWatch, *v1alpha1.DigestEmail) (*email.Channel, error) {
	return nil, errors.New("no channels")
}

const (
	unitTenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	unitApp    = "3f2c8a5e-9b1d-4c6e-8f7a-2b4d6e8f0a1c"
)

type unit struct {
	t        *testing.T
	r        *CredentialWatchReconciler
	c        client.Client
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
	key      types.NamespacedName
}

// unitWatch watches the service principal unitApp, with the spec's defaults the API server
// would fill in.
func unitWatch(edit func(*v1alpha1.CredentialWatchSpec)) *v1alpha1.CredentialWatch {
	w := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "payments", Generation: 1, UID: "2b9c0c1e-4d8e-4f1a-9c1b-1f0e2d3c4b5a"},
		Spec: v1alpha1.CredentialWatchSpec{
			Target:        v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: unitTenant, ClientID: unitApp}},
			CheckInterval: "6h",
			Thresholds:    v1alpha1.Thresholds{Warning: "30d", Critical: "7d"},
		},
	}
	if edit != nil {
		edit(&w.Spec)
	}
	return w
}

func newUnit(t *testing.T, az Azure, w *v1alpha1.CredentialWatch, objs ...client.Object) *unit {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	id := operatorIdentity()
	id.Status = signedIn(id.Generation)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.Namespace}}
	c := crfake.NewClientBuilder().WithScheme(s).WithObjects(append(objs, w, id, ns)...).WithStatusSubresource(&v1alpha1.CredentialWatch{}).Build()
	u := &unit{t: t, c: c, clock: clocktesting.NewFakeClock(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)),
		recorder: record.NewFakeRecorder(100), key: client.ObjectKeyFromObject(w)}
	u.r = &CredentialWatchReconciler{Client: c, SecretReader: c, DefaultIdentity: testIdentity, Recorder: u.recorder, Clock: u.clock,
		Rand: func() float64 { return 0 }, Azure: az, Channels: noChannels{}, Scans: tenantscan.NewStore(),
		Paces: &pacing.Store{Reader: c, Writer: c, Namespace: "credwatch"}}
	return u
}

func (u *unit) reconcile() (*v1alpha1.CredentialWatch, ctrl.Result) {
	u.t.Helper()
	res, err := u.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: u.key})
	if err != nil {
		u.t.Fatalf("Reconcile: %v", err)
	}
	w := &v1alpha1.CredentialWatch{}
	if err := u.c.Get(context.Background(), u.key, w); err != nil {
		u.t.Fatal(err)
	}
	return w, res
}

func (u *unit) events() []string {
	var out []string
	for {
		select {
		case e := <-u.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func wantCondition(t *testing.T, w *v1alpha1.CredentialWatch, condType string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(w.Status.Conditions, condType)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %+v, want %s %s", condType, c, status, reason)
	}
}

// reads is an application whose credentials are snap, counting its reads and who made them.
type reads struct {
	n   int
	ids []azure.Identity
	err error
}

func (r *reads) azure(snap graph.Snapshot) *azurefake.Azure {
	return &azurefake.Azure{ApplicationFunc: func(id azure.Identity, ref graph.AppRef) (graph.AppClient, error) {
		r.ids = append(r.ids, id)
		return &azurefake.App{ReadCredentialsFunc: func(context.Context) (graph.Snapshot, error) {
			r.n++
			if ref.AppID != unitApp {
				return graph.Snapshot{}, errors.New("read another application: " + ref.AppID)
			}
			return snap, r.err
		}}, nil
	}}
}

func snapshot(end time.Time) graph.Snapshot {
	return graph.Snapshot{AppID: unitApp, DisplayName: "payments-api", ApplicationObjectID: "a0e1", ServicePrincipalObjectID: "s0e1",
		Credentials: []graph.Credential{{KeyID: "k1", Type: graph.Password, Source: graph.Application, DisplayName: "ci", End: end}}}
}

// A check records the credentials and their state, as of the clock, and comes back no later than
// the next thing to change; the next reconcile before the interval reads nothing.
func TestUnitCheckRecordsCredentials(t *testing.T) {
	r := &reads{}
	u := newUnit(t, nil, unitWatch(nil))
	u.r.Azure = r.azure(snapshot(u.clock.Now().Add(5 * 24 * time.Hour)))

	w, res := u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	wantCondition(t, w, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinCritical)
	if w.Status.State != v1alpha1.StateCritical || len(w.Status.Credentials) != 1 || w.Status.ServicePrincipal.ApplicationObjectID != "a0e1" {
		t.Errorf("status = %+v", w.Status)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Hour {
		t.Errorf("requeued after %v, want within the hour, when EXPIRES IN changes", res.RequeueAfter)
	}
	if ev := u.events(); len(ev) != 1 || !strings.Contains(ev[0], "CredentialCritical") || !strings.Contains(ev[0], "az ad app credential reset --id "+unitApp) {
		t.Errorf("events %q, want one CredentialCritical with the fix", ev)
	}
	if len(r.ids) != 1 || !r.ids[0].IsOperator() || r.ids[0].TenantID != unitTenant {
		t.Errorf("signed in as %v, want the operator's identity in the watch's tenant", r.ids)
	}

	u.clock.Step(time.Hour)
	u.reconcile()
	if r.n != 1 {
		t.Errorf("Graph read %d times, want once: the next check is hours away", r.n)
	}
}

// A throttled check says so, waits at least Graph's Retry-After even against a person's request,
// and tells of the failure once.
func TestUnitThrottledCheckWaitsItsRetryAfter(t *testing.T) {
	r := &reads{err: &azerr.Error{Kind: azerr.KindThrottled, Status: 429, RetryAfter: 150 * time.Second, Err: errors.New("too many requests")}}
	u := newUnit(t, nil, unitWatch(nil))
	u.r.Azure = r.azure(graph.Snapshot{})

	w, res := u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonThrottled)
	if got := w.Status.NextCheckTime.Sub(u.clock.Now()); got != 150*time.Second || res.RequeueAfter != got {
		t.Errorf("next check in %v, requeued after %v; want both Retry-After, 2m30s", got, res.RequeueAfter)
	}
	w.Annotations = map[string]string{v1alpha1.CheckAnnotation: "now"}
	if err := u.c.Update(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	u.clock.Step(time.Minute)
	u.reconcile()
	if r.n != 1 {
		t.Errorf("Graph read %d times, want once: a request does not beat Retry-After", r.n)
	}
	u.clock.Step(2 * time.Minute)
	w, _ = u.reconcile()
	if r.n != 2 || w.Status.ConsecutiveFailures != 2 {
		t.Errorf("Graph read %d times, %d failures; want a second try once Retry-After passed", r.n, w.Status.ConsecutiveFailures)
	}
	if ev := u.events(); len(ev) != 1 || !strings.Contains(ev[0], v1alpha1.ReasonThrottled) {
		t.Errorf("events %q, want one Throttled", ev)
	}
}

// A watch that names an AzureIdentity signs in as the client its Secret holds, and a watch
// whose identity's Secret is missing says so without calling Azure at all.
func TestUnitWatchSignsInAsItsAzureIdentity(t *testing.T) {
	withRef := func(s *v1alpha1.CredentialWatchSpec) {
		s.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "graph-reader"}
	}
	id := teamIdentity(func(s *v1alpha1.IdentitySpec) {})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "graph-reader"},
		Data: map[string][]byte{"clientSecret": []byte("rEader~secret")}}

	r := &reads{}
	u := newUnit(t, nil, unitWatch(withRef), secret, id)
	u.r.Azure = r.azure(snapshot(u.clock.Now().Add(300 * 24 * time.Hour)))
	w, _ := u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	if len(r.ids) != 1 || r.ids[0].TenantID != unitTenant || r.ids[0].ClientID != teamClient || r.ids[0].Secret.Reveal() != "rEader~secret" {
		t.Errorf("signed in as %v, want client %s with the Secret's secret, in the watch's tenant", r.ids, teamClient)
	}

	u = newUnit(t, &azurefake.Azure{}, unitWatch(withRef), teamIdentity(func(s *v1alpha1.IdentitySpec) {}))
	w, _ = u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonCredentialSecretInvalid)
	if c := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "team-a/graph-reader") {
		t.Errorf("Ready says %q, want the Secret named", c.Message)
	}
}

const teamClient = "5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e"

// teamIdentity is team-a's AzureIdentity graph-reader, signed in, allowing unitApp, as edit says.
func teamIdentity(edit func(*v1alpha1.IdentitySpec)) *v1alpha1.AzureIdentity {
	id := &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "graph-reader", Generation: 1}}
	id.Spec.ClientSecret = &v1alpha1.ClientSecretSignIn{TenantID: unitTenant, ClientID: teamClient,
		SecretRef: v1alpha1.SecretKeyRef{Name: "graph-reader", Key: "clientSecret"}}
	id.Spec.Allow.Applications = []string{unitApp}
	edit(&id.Spec.IdentitySpec)
	id.Status = signedIn(1)
	return id
}

// Whatever a watch asks of an identity that does not allow it, or of no identity, is refused
// with a reason that says what to fix, and nothing reaches Azure.
func TestUnitIdentityRefusesBeforeAzureIsAsked(t *testing.T) {
	named := func(kind, name string) func(*v1alpha1.CredentialWatchSpec) {
		return func(s *v1alpha1.CredentialWatchSpec) { s.IdentityRef = &v1alpha1.IdentityRef{Kind: kind, Name: name} }
	}
	cluster := func(edit func(*v1alpha1.ClusterAzureIdentity)) *v1alpha1.ClusterAzureIdentity {
		id := operatorIdentity()
		id.Name, id.Generation = "shared", 1
		edit(id)
		id.Status = signedIn(1)
		return id
	}
	for _, tc := range []struct {
		name        string
		edit        func(*v1alpha1.CredentialWatchSpec)
		noDefault   bool
		defaultName string
		objs        []client.Object
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{name: "an appId its identity does not list", edit: named(v1alpha1.KindAzureIdentity, "graph-reader"),
			objs:       []client.Object{teamIdentity(func(s *v1alpha1.IdentitySpec) { s.Allow.Applications = []string{teamClient} })},
			wantReason: v1alpha1.ReasonIdentityNotAllowed, wantMessage: "AzureIdentity team-a/graph-reader does not allow this: allow.applications does not list appId " + unitApp},
		{name: "another tenant", edit: named(v1alpha1.KindAzureIdentity, "graph-reader"),
			objs:       []client.Object{teamIdentity(func(s *v1alpha1.IdentitySpec) { s.Allow.Tenants = []string{teamClient} })},
			wantReason: v1alpha1.ReasonIdentityNotAllowed, wantMessage: "allow.tenants does not list tenant " + unitTenant},
		{name: "a cluster identity whose conditions exclude the namespace", edit: named(v1alpha1.KindClusterAzureIdentity, "shared"),
			objs: []client.Object{cluster(func(id *v1alpha1.ClusterAzureIdentity) {
				id.Spec.Conditions = []v1alpha1.NamespaceCondition{{Namespaces: []string{"team-b"}}}
			})},
			wantReason: v1alpha1.ReasonIdentityNotAllowed, wantMessage: "ClusterAzureIdentity shared does not allow this: its conditions do not admit namespace team-a"},
		{name: "a tenant scan without TenantScan", edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: unitTenant}}
			named(v1alpha1.KindClusterAzureIdentity, "shared")(s)
		},
			objs:       []client.Object{cluster(func(id *v1alpha1.ClusterAzureIdentity) { id.Spec.Allow.Operations = nil })},
			wantReason: v1alpha1.ReasonIdentityNotAllowed, wantMessage: "allow.operations does not list TenantScan"},
		{name: "a cluster outside its subscriptions", edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{TenantID: unitTenant, SubscriptionID: teamClient, ResourceGroup: "rg", Name: "aks"}}
		},
			wantReason: v1alpha1.ReasonIdentityNotAllowed, wantMessage: "allow.subscriptions does not list subscription " + teamClient},
		{name: "an identity that does not exist", edit: named(v1alpha1.KindAzureIdentity, "nobody"),
			wantReason: v1alpha1.ReasonIdentityNotFound, wantMessage: "AzureIdentity team-a/nobody does not exist"},
		{name: "an identity that does not sign in", edit: named(v1alpha1.KindClusterAzureIdentity, "shared"),
			objs: []client.Object{func() client.Object {
				id := cluster(func(*v1alpha1.ClusterAzureIdentity) {})
				id.Status.Conditions[0].Status, id.Status.Conditions[0].Message = metav1.ConditionFalse, "invalid_client AADSTS7000222"
				return id
			}()},
			wantReason: v1alpha1.ReasonIdentityNotReady, wantMessage: "AADSTS7000222"},
		{name: "an identity whose new spec has not signed in: waiting, nothing failed", edit: named(v1alpha1.KindClusterAzureIdentity, "shared"),
			objs:       []client.Object{cluster(func(id *v1alpha1.ClusterAzureIdentity) { id.Generation = 2 })},
			wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonIdentityNotReady, wantMessage: "Waiting for ClusterAzureIdentity shared to sign in"},
		{name: "a default identity that does not exist", edit: func(*v1alpha1.CredentialWatchSpec) {}, noDefault: true, defaultName: "missing",
			wantReason: v1alpha1.ReasonIdentityNotFound, wantMessage: "the operator's default identity, ClusterAzureIdentity missing, does not exist"},
		{name: "no identity and no default", noDefault: true,
			wantReason: v1alpha1.ReasonNoIdentity, wantMessage: "create an AzureIdentity in namespace team-a"},
		{name: "an azureCredentialRef left from before", edit: func(s *v1alpha1.CredentialWatchSpec) {
			s.AzureCredentialRef = &corev1.LocalObjectReference{Name: "graph-reader"}
		},
			wantReason: v1alpha1.ReasonIdentityMigrationNeeded, wantMessage: "spec.clientSecret naming Secret graph-reader"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Any call to Azure fails the test: azurefake's nil fields.
			calls := 0
			az := &azurefake.Azure{SignInFunc: func(context.Context, azure.Identity) error { calls++; return nil }}
			u := newUnit(t, az, unitWatch(tc.edit), tc.objs...)
			if tc.noDefault {
				u.r.DefaultIdentity = tc.defaultName
			}
			w, _ := u.reconcile()
			want := metav1.ConditionFalse
			if tc.wantStatus != "" {
				want = tc.wantStatus
			}
			wantCondition(t, w, v1alpha1.ConditionReady, want, tc.wantReason)
			if c := target.Condition(w, v1alpha1.ConditionReady); !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("Ready says %q, want it to say %q", c.Message, tc.wantMessage)
			}
			ev := u.events()
			switch {
			case want == metav1.ConditionUnknown && len(ev) != 0:
				t.Errorf("events %q while waiting, want none", ev)
			case want == metav1.ConditionFalse && (len(ev) != 1 || !strings.Contains(ev[0], tc.wantReason)):
				t.Errorf("events %q, want one %s", ev, tc.wantReason)
			}
			if calls != 0 {
				t.Errorf("Azure was called %d times", calls)
			}
		})
	}
}

// An AKS target reads the cluster first and watches the service principal it signs in with; on a
// managed identity there is nothing to read in Graph.
func TestUnitAKSTargetFollowsTheCluster(t *testing.T) {
	ref := aks.ClusterRef{SubscriptionID: testSubscription, ResourceGroup: "rg-prod", Name: "aks-prod"}
	aksTarget := func(s *v1alpha1.CredentialWatchSpec) {
		s.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{TenantID: unitTenant, SubscriptionID: ref.SubscriptionID, ResourceGroup: ref.ResourceGroup, Name: ref.Name}}
	}
	for name, tc := range map[string]struct {
		clientID   string
		wantReason string
		wantReads  int
	}{
		"a service principal": {clientID: unitApp, wantReason: v1alpha1.ReasonChecked, wantReads: 1},
		"a managed identity":  {clientID: "", wantReason: v1alpha1.ReasonManagedIdentity, wantReads: 0},
	} {
		t.Run(name, func(t *testing.T) {
			r := &reads{}
			u := newUnit(t, nil, unitWatch(aksTarget))
			az := r.azure(snapshot(u.clock.Now().Add(300 * 24 * time.Hour)))
			az.ClusterFunc = func(_ azure.Identity, got aks.ClusterRef) (aks.ClusterClient, error) {
				if got != ref {
					t.Errorf("cluster %+v, want %+v", got, ref)
				}
				return &azurefake.Cluster{ReadFunc: func(context.Context) (aks.Cluster, error) {
					return aks.Cluster{ClientID: tc.clientID, ProvisioningState: "Succeeded", PowerState: "Running"}, nil
				}}, nil
			}
			u.r.Azure = az
			w, _ := u.reconcile()
			wantCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, tc.wantReason)
			if r.n != tc.wantReads || w.Status.AKSCluster == nil || w.Status.AKSCluster.ProvisioningState != "Succeeded" {
				t.Errorf("%d Graph reads, cluster status %+v", r.n, w.Status.AKSCluster)
			}
		})
	}
}

// A cluster Resource Manager does not know is ClusterNotFound, not a Graph failure, and drops
// what was known of its service principal.
func TestUnitClusterNotFound(t *testing.T) {
	w := unitWatch(func(s *v1alpha1.CredentialWatchSpec) {
		s.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{TenantID: unitTenant, SubscriptionID: testSubscription, ResourceGroup: "rg", Name: "gone"}}
	})
	// Known from an earlier check, when the cluster was there.
	w.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{AppID: unitApp, DisplayName: "payments-api"}
	w.Status.Credentials = []v1alpha1.Credential{{KeyID: "k1", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication}}
	u := newUnit(t, &azurefake.Azure{ClusterFunc: func(azure.Identity, aks.ClusterRef) (aks.ClusterClient, error) {
		return &azurefake.Cluster{ReadFunc: func(context.Context) (aks.Cluster, error) {
			return aks.Cluster{}, &azerr.Error{Kind: azerr.KindNotFound, Status: 404, Code: "ResourceNotFound", Err: errors.New("not found")}
		}}, nil
	}}, w)
	w, _ = u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonClusterNotFound)
	if w.Status.Credentials != nil || w.Status.ServicePrincipal != nil {
		t.Errorf("status keeps what was known: %+v", w.Status)
	}
}

// notifier is a channel that keeps what it was sent, or fails with err.
type notifier struct {
	sent []notify.Alert
	err  error
}

func (n *notifier) Name() string { return "test" }

func (n *notifier) Send(_ context.Context, a notify.Alert) error {
	if n.err != nil {
		return n.err
	}
	n.sent = append(n.sent, a)
	return nil
}

// oneChannel is a watch's channels when it has the one given.
type oneChannel struct {
	noChannels
	n *notifier
}

func (c oneChannel) For(context.Context, *v1alpha1.CredentialWatch, access.Identity) (channels.Set, error) {
	return channels.Set{{ID: "test-1a2b", Notifier: c.n}}, nil
}
func (oneChannel) NotifiesOwners(*v1alpha1.CredentialWatch, access.Identity) bool { return false }

// A reminder that falls due is claimed in the ledger and sent once; a failed send gives its claim
// back and the channel waits out its backoff, while the watch says so.
func TestUnitAlertsAreClaimedSentOnceAndRetried(t *testing.T) {
	r := &reads{}
	n := &notifier{err: &notify.DeliveryError{Err: errors.New("503 Service Unavailable")}}
	u := newUnit(t, nil, unitWatch(nil))
	// Half a day past a whole day, so that EXPIRES IN changes hours away, not at the next second.
	u.r.Azure = r.azure(snapshot(u.clock.Now().Add(5*24*time.Hour + 12*time.Hour)))
	u.r.Channels = oneChannel{n: n}

	w, res := u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionFalse, v1alpha1.ReasonDeliveryFailed)
	if w.Status.Alerts == nil || len(w.Status.Alerts.Sent) != 0 || len(w.Status.Alerts.Failing) != 1 {
		t.Fatalf("ledger %+v, want the claim given back and the channel failing", w.Status.Alerts)
	}
	if res.RequeueAfter != time.Minute {
		t.Errorf("requeued after %v, want the channel's first backoff, 1m", res.RequeueAfter)
	}

	n.err = nil
	u.clock.Step(30 * time.Second)
	u.reconcile()
	if len(n.sent) != 0 {
		t.Errorf("sent %d before the backoff ran out", len(n.sent))
	}
	u.clock.Step(30 * time.Second)
	w, _ = u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionAlertsDelivered, metav1.ConditionTrue, v1alpha1.ReasonDelivered)
	if len(n.sent) != 1 || n.sent[0].Kind != alertkind.Reminder || n.sent[0].Title() != "Secret of payments-api expires in 5 days" {
		t.Fatalf("sent %+v, want the 7d reminder", n.sent)
	}
	if len(w.Status.Alerts.Sent) != 1 || w.Status.Alerts.Sent[0].Step != "7d" {
		t.Errorf("ledger %+v, want the 7d step recorded", w.Status.Alerts.Sent)
	}
	u.clock.Step(time.Hour)
	u.reconcile()
	if len(n.sent) != 1 {
		t.Errorf("sent %d, want the reminder once", len(n.sent))
	}
}

// rotatingWatch is a watch checked a moment ago, no check due, with a rotation in progress at
// step, pinned to the application object objectID.
func rotatingWatch(step v1alpha1.RotationStep, objectID string) *v1alpha1.CredentialWatch {
	w := unitWatch(func(s *v1alpha1.CredentialWatchSpec) {
		s.Rotation = &v1alpha1.Rotation{Enabled: true, Mode: v1alpha1.RotationApply, RotateBefore: "30d", Validity: "365d", GracePeriod: "7d",
			RemoveOld: v1alpha1.RemoveOldCreatedByCredwatch, SecretRef: v1alpha1.SecretName{Name: "payments-sp"}}
	})
	now := metav1.NewTime(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	later := metav1.NewTime(now.Add(time.Hour))
	w.Status.ObservedGeneration, w.Status.LastCheckTime, w.Status.NextCheckTime = 1, &now, &later
	w.Status.Rotation = &v1alpha1.RotationStatus{Step: step, DisplayName: "credwatch-2b9c0c1e-20261203T085900Z",
		AppID: unitApp, ApplicationObjectID: objectID, StartTime: now}
	if step != v1alpha1.StepStarted {
		w.Status.Rotation.KeyID = "k-new" // added and stored
	}
	if step == v1alpha1.StepSecretStored {
		// Accepted twice over the last two minutes: the next acceptance lets it be used.
		first := metav1.NewTime(now.Add(-2 * time.Minute))
		w.Status.Rotation.Acceptances, w.Status.Rotation.FirstAcceptedTime = 2, &first
	}
	return w
}

// A maintenance window in a time zone nobody knows blocks the rotation before it starts, rather
// than after a secret was made for a reset that could never be scheduled.
func TestUnitRotationWithAnUnknownTimeZoneDoesNotStart(t *testing.T) {
	r := &reads{}
	w := unitWatch(func(s *v1alpha1.CredentialWatchSpec) {
		s.Rotation = &v1alpha1.Rotation{Enabled: true, Mode: v1alpha1.RotationApply, RotateBefore: "30d", Validity: "365d", GracePeriod: "7d",
			RemoveOld: v1alpha1.RemoveOldCreatedByCredwatch, SecretRef: v1alpha1.SecretName{Name: "payments-sp"},
			MaintenanceWindow: &v1alpha1.MaintenanceWindow{Start: "02:00", Duration: "4h", TimeZone: "Mars/Olympus_Mons"}}
	})
	u := newUnit(t, nil, w)
	u.r.Azure = r.azure(snapshot(u.clock.Now().Add(5 * 24 * time.Hour))) // due: within rotateBefore
	w, _ = u.reconcile()
	wantCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationBlocked)
	if c := target.Condition(w, v1alpha1.ConditionRotating); !strings.Contains(c.Message, `maintenanceWindow.timeZone "Mars/Olympus_Mons"`) {
		t.Errorf("Rotating says %q, want the unknown time zone named", c.Message)
	}
	if w.Status.Rotation != nil {
		t.Errorf("a rotation started: %+v", w.Status.Rotation)
	}
}

// storedSecret is the target Secret as the rotation of rotatingWatch wrote it.
func storedSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "payments-sp",
		Labels:      map[string]string{policy.LabelManagedBy: policy.ManagedByCredwatch},
		Annotations: map[string]string{policy.AnnotationWatch: "payments", policy.AnnotationSecretOld: "credwatch-2b9c0c1e-20261203T085900Z"}},
		Data: map[string][]byte{"clientID": []byte(unitApp), "clientSecret": []byte("nEw~secret"), "keyID": []byte("k-new")}}
}

// An identity that stops allowing Rotate while the rotation's new secret is not used yet
// withdraws the rotation: the secret leaves Graph, nothing signs in with it, and the event says
// why. (Once the secret may be in use, the rotation waits for Rotate instead: rotation's
// TestRunRevokedRotateWithdrawsAnUnusedSecret.)
func TestUnitRotationRevokedWithdrawsItsUnusedSecret(t *testing.T) {
	w := rotatingWatch(v1alpha1.StepSecretStored, "a0e1")
	w.Status.Rotation.SecretDigest = fmt.Sprintf("%x", sha256.Sum256([]byte("nEw~secret"))) // begun by this version
	w.Spec.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindAzureIdentity, Name: "graph-reader"}
	id := teamIdentity(func(s *v1alpha1.IdentitySpec) {}) // Watch only: Rotate was taken away
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "graph-reader"}, Data: map[string][]byte{"clientSecret": []byte("x")}}
	signIns := 0
	var removed []string
	u := newUnit(t, &azurefake.Azure{
		ApplicationFunc: func(azure.Identity, graph.AppRef) (graph.AppClient, error) {
			return &azurefake.App{
				ReadCredentialsFunc: func(context.Context) (graph.Snapshot, error) {
					return graph.Snapshot{AppID: unitApp, ApplicationObjectID: "a0e1", Credentials: []graph.Credential{
						{KeyID: "k-new", Type: graph.Password, Source: graph.Application, DisplayName: "credwatch-2b9c0c1e-20261203T085900Z"}}}, nil
				},
				RemovePasswordFunc: func(_ context.Context, keyID string) error { removed = append(removed, keyID); return nil },
			}, nil
		},
		SignInFunc: func(context.Context, azure.Identity) error { signIns++; return nil },
	}, w, storedSecret(), id, secret)

	w, _ = u.reconcile()
	if w.Status.Rotation != nil || !slices.Equal(removed, []string{"k-new"}) || signIns != 0 {
		t.Fatalf("status.rotation = %+v, removed %q after %d sign-ins; want the rotation withdrawn and its secret removed, unused", w.Status.Rotation, removed, signIns)
	}
	wantCondition(t, w, v1alpha1.ConditionRotating, metav1.ConditionFalse, v1alpha1.ReasonRotationAborted)
	if ev := u.events(); len(ev) != 1 || !strings.Contains(ev[0], "no longer allows Rotate") {
		t.Errorf("events %q, want one saying the rotation was withdrawn as Rotate is no longer allowed", ev)
	}
}

// A rotation in progress acts on the application pinned when it started, whatever the watch's
// status has read since.
func TestUnitRotationInProgressUsesThePinnedApplication(t *testing.T) {
	w := rotatingWatch(v1alpha1.StepStarted, "a0e1-pinned")
	w.Status.ServicePrincipal = &v1alpha1.ServicePrincipalStatus{AppID: unitApp, ApplicationObjectID: "a0e1-read-since"}
	var refs []graph.AppRef
	u := newUnit(t, &azurefake.Azure{ApplicationFunc: func(_ azure.Identity, ref graph.AppRef) (graph.AppClient, error) {
		refs = append(refs, ref)
		return &azurefake.App{ReadCredentialsFunc: func(context.Context) (graph.Snapshot, error) {
			return graph.Snapshot{}, &azerr.Error{Kind: azerr.KindUnavailable, Err: errors.New("Graph did not answer")}
		}}, nil
	}}, w)

	w, _ = u.reconcile()
	if want := (graph.AppRef{AppID: unitApp, ObjectID: "a0e1-pinned"}); len(refs) != 1 || refs[0] != want {
		t.Errorf("the rotation used %+v, want only %+v", refs, want)
	}
	if st := w.Status.Rotation; st == nil || st.Step != v1alpha1.StepStarted || st.Failures != 1 || st.NextAttemptTime == nil {
		t.Errorf("status.rotation = %+v, want the step failed once and retried later", st)
	}
}

// pinnedCluster is the cluster a rotation of an AKS target pins when it starts.
var pinnedCluster = &v1alpha1.RotationCluster{SubscriptionID: "8f7e6d5c-4b3a-4291-8f7e-6d5c4b3a2918", ResourceGroup: "rg-prod", Name: "aks-prod"}

// A spec that stops naming what a rotation pinned (here its cluster, the target now a service
// principal; or another tenant) pauses it before its first reset, asking nothing of Azure. Once
// a reset began, the rotation finishes on the cluster it pinned, and says the change waits.
func TestUnitRotationTargetChanged(t *testing.T) {
	for _, tc := range []struct {
		name       string
		step       v1alpha1.RotationStep
		resets     int32
		tenant     string
		wantStatus metav1.ConditionStatus
		wantCalls  int
	}{
		{name: "cluster dropped before the reset", step: v1alpha1.StepSecretVerified, tenant: unitTenant, wantStatus: metav1.ConditionFalse},
		{name: "tenant changed before the reset", step: v1alpha1.StepSecretStored, tenant: "0d9e8f7a-6b5c-4d3e-2f1a-0b9c8d7e6f5a", wantStatus: metav1.ConditionFalse},
		{name: "cluster dropped during the reset", step: v1alpha1.StepClusterUpdating, resets: 1, tenant: unitTenant, wantStatus: metav1.ConditionTrue, wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := rotatingWatch(tc.step, "a0e1")
			w.Status.Rotation.Cluster, w.Status.Rotation.TenantID, w.Status.Rotation.Resets = pinnedCluster, tc.tenant, tc.resets
			w.Status.Rotation.ResumeToken = "token"
			var clusters []aks.ClusterRef
			u := newUnit(t, &azurefake.Azure{
				ApplicationFunc: func(azure.Identity, graph.AppRef) (graph.AppClient, error) { return &azurefake.App{}, nil },
				ClusterFunc: func(_ azure.Identity, ref aks.ClusterRef) (aks.ClusterClient, error) {
					clusters = append(clusters, ref)
					return &azurefake.Cluster{PollResetFunc: func(context.Context, string) (bool, error) { return false, nil }}, nil
				},
			}, w, storedSecret())

			w, _ = u.reconcile()
			c := target.Condition(w, v1alpha1.ConditionRotating)
			if c.Reason != v1alpha1.ReasonRotationTargetChanged || c.Status != tc.wantStatus {
				t.Fatalf("Rotating = %+v, want %s %s", c, tc.wantStatus, v1alpha1.ReasonRotationTargetChanged)
			}
			if st := w.Status.Rotation; st == nil || st.Step != tc.step || st.RetireTime != nil {
				t.Errorf("status.rotation = %+v, want it at %s, retiring nothing", st, tc.step)
			}
			if want := (aks.ClusterRef{SubscriptionID: pinnedCluster.SubscriptionID, ResourceGroup: "rg-prod", Name: "aks-prod"}); len(clusters) != tc.wantCalls ||
				(tc.wantCalls > 0 && clusters[0] != want) {
				t.Errorf("clusters reached: %+v, want %d, the pinned one", clusters, tc.wantCalls)
			}
		})
	}
}

// A planned check first only asks: nothing is written and no other step runs until its answer
// wakes the watch, whose reconcile then records it without reading the cluster again.
func TestUnitPlannedCheckWaitsForItsAnswer(t *testing.T) {
	const clusterApp = unitApp
	w := unitWatch(func(s *v1alpha1.CredentialWatchSpec) {
		s.Target = v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{TenantID: unitTenant,
			SubscriptionID: testSubscription, ResourceGroup: "rg", Name: "prod"}}
	})
	u := newUnit(t, nil, w)
	var clusterReads, checks int
	var wake func()
	answer := snapshot(u.clock.Now().Add(5 * 24 * time.Hour))
	u.r.Azure = &azurefake.Azure{
		ClusterFunc: func(azure.Identity, aks.ClusterRef) (aks.ClusterClient, error) {
			return &azurefake.Cluster{ReadFunc: func(context.Context) (aks.Cluster, error) {
				clusterReads++
				return aks.Cluster{ClientID: clusterApp, ProvisioningState: "Succeeded"}, nil
			}}, nil
		},
		ApplicationFunc: func(azure.Identity, graph.AppRef) (graph.AppClient, error) {
			return &azurefake.App{CheckFunc: func(_ context.Context, ask graph.Ask) (graph.Snapshot, error) {
				if checks++; checks == 1 {
					wake = ask.Wake
					return graph.Snapshot{}, graph.ErrPending
				}
				return answer, nil
			}}, nil
		},
	}

	before := &v1alpha1.CredentialWatch{}
	if err := u.c.Get(context.Background(), u.key, before); err != nil {
		t.Fatal(err)
	}
	got, res := u.reconcile()
	if got.ResourceVersion != before.ResourceVersion {
		t.Errorf("the pending check wrote status: %+v", got.Status)
	}
	if res.RequeueAfter != pendingRecheck {
		t.Errorf("requeued after %v, want %v, in case nothing wakes it", res.RequeueAfter, pendingRecheck)
	}
	if ev := u.events(); len(ev) != 0 {
		t.Errorf("events %q before the answer", ev)
	}
	if wake == nil {
		t.Fatal("the check gave the planner nothing to wake")
	}

	got, _ = u.reconcile()
	wantCondition(t, got, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	if got.Status.State != v1alpha1.StateCritical || got.Status.AKSCluster == nil || got.Status.AKSCluster.ClientID != clusterApp {
		t.Errorf("status = %+v", got.Status)
	}
	if clusterReads != 1 || checks != 2 {
		t.Errorf("the cluster read %d times and Graph asked %d times, want once and twice", clusterReads, checks)
	}
}

// A check lets the planner list the whole tenant for it only when its identity may scan the
// tenant: an admin who did not grant TenantScan did not allow a listing.
func TestUnitACheckMayListOnlyWhatItsIdentityMayScan(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []v1alpha1.Operation
		want bool
	}{
		{"TenantScan granted", []v1alpha1.Operation{v1alpha1.OperationTenantScan}, true},
		{"not granted", []v1alpha1.Operation{v1alpha1.OperationRotate}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t, nil, unitWatch(nil))
			id := &v1alpha1.ClusterAzureIdentity{}
			if err := u.c.Get(context.Background(), client.ObjectKey{Name: testIdentity}, id); err != nil {
				t.Fatal(err)
			}
			id.Spec.Allow.Operations = tc.ops
			if err := u.c.Update(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			var asked []graph.Ask
			u.r.Azure = &azurefake.Azure{ApplicationFunc: func(azure.Identity, graph.AppRef) (graph.AppClient, error) {
				return &azurefake.App{CheckFunc: func(_ context.Context, ask graph.Ask) (graph.Snapshot, error) {
					asked = append(asked, ask)
					return graph.Snapshot{}, graph.ErrPending
				}}, nil
			}}
			u.reconcile()
			if len(asked) != 1 || asked[0].MayList != tc.want || asked[0].Asker != u.key.String() {
				t.Errorf("asked %+v, want one ask by %s with MayList %t", asked, u.key, tc.want)
			}
		})
	}
}

// updates counts the writes of whole objects, as opposed to their status.
type updates struct {
	client.Client
	n int
}

func (u *updates) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	u.n++
	return u.Client.Update(ctx, obj, opts...)
}

// A watch without a rotation is never written, only its status: at ten thousand watches a
// write each reconcile was ten thousand writes a restart.
func TestUnitAWatchWithoutRotationIsNotWritten(t *testing.T) {
	r := &reads{}
	u := newUnit(t, nil, unitWatch(nil))
	u.r.Azure = r.azure(snapshot(u.clock.Now().Add(50 * 24 * time.Hour)))
	counted := &updates{Client: u.c}
	u.r.Client = counted
	for range 3 {
		u.reconcile()
		u.clock.Step(time.Hour)
	}
	if counted.n != 0 {
		t.Errorf("%d updates of the watch, want none", counted.n)
	}
}

// A watch that will not come for the answer its check asked the planner for withdraws it, by the
// name it asked with: deleted, or checking some other way now. An answer no one takes would hold
// back the reads of every watch on its identity.
func TestUnitAWatchThatWillNotTakeItsAnswerWithdrawsIt(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, u *unit, w *v1alpha1.CredentialWatch)
	}{
		{"deleted", func(t *testing.T, u *unit, w *v1alpha1.CredentialWatch) {
			if err := u.c.Delete(context.Background(), w); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted while a rotation holds it", func(t *testing.T, u *unit, w *v1alpha1.CredentialWatch) {
			if err := u.c.Get(context.Background(), u.key, w); err != nil {
				t.Fatal(err)
			}
			w.Finalizers = append(w.Finalizers, rotationFinalizer)
			if err := u.c.Update(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			if err := u.c.Delete(context.Background(), w); err != nil {
				t.Fatal(err)
			}
		}},
		{"a tenant scan now", func(t *testing.T, u *unit, w *v1alpha1.CredentialWatch) {
			if err := u.c.Get(context.Background(), u.key, w); err != nil {
				t.Fatal(err)
			}
			w.Spec.Target = v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: unitTenant}}
			w.Generation++
			if err := u.c.Update(context.Background(), w); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := unitWatch(nil)
			u := newUnit(t, nil, w)
			var asker string
			var withdrawn []string
			u.r.Azure = &azurefake.Azure{
				ApplicationFunc: func(azure.Identity, graph.AppRef) (graph.AppClient, error) {
					return &azurefake.App{CheckFunc: func(_ context.Context, ask graph.Ask) (graph.Snapshot, error) {
						asker = ask.Asker
						return graph.Snapshot{}, graph.ErrPending
					}}, nil
				},
				WithdrawFunc: func(a string) { withdrawn = append(withdrawn, a) },
			}
			u.reconcile()
			if asker == "" || len(withdrawn) != 0 {
				t.Fatalf("asked as %q, withdrawn %q while the check waits", asker, withdrawn)
			}
			tc.change(t, u, w)
			if _, err := u.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: u.key}); err != nil {
				t.Fatal(err)
			}
			if len(withdrawn) != 1 || withdrawn[0] != asker {
				t.Errorf("withdrawn %q, want what the check asked as, %q", withdrawn, asker)
			}
		})
	}
}
