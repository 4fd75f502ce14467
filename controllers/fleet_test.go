package controllers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	armfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	subfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions/fake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure/clients"
	cwmetrics "github.com/credwatch/credwatch/internal/metrics"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/aksfleet"
	"github.com/credwatch/credwatch/internal/target/tenantscan"
)

// The fleet's subscriptions: two it may read, one Resource Manager refuses it.
const (
	fleetSubA      = "a1c2e3f4-0000-4000-8000-00000000000a"
	fleetSubB      = "b1c2e3f4-0000-4000-8000-00000000000b"
	fleetForbidden = "c1c2e3f4-0000-4000-8000-00000000000c"
	// fleetPage is how many clusters the fake lists a page: both subscriptions take several.
	fleetPage = 5
)

// fleetARM is Resource Manager for a fleet: the subscriptions list, and each subscription's
// clusters, a page at a time, through the SDK's own fakes. The fake's list pager is not told
// which subscription it lists, so requests are routed by the subscription their URL names.
type fleetARM struct {
	mu         sync.Mutex
	clusters   map[string][]*armcontainerservice.ManagedCluster
	transports map[string]*armfake.ManagedClustersServerTransport
	subs       *subfake.ServerTransport
	// unavailable are subscriptions whose listings fail for now, as Resource Manager's 503s do.
	unavailable map[string]bool
}

func newFleetARM() *fleetARM {
	f := &fleetARM{clusters: map[string][]*armcontainerservice.ManagedCluster{}, transports: map[string]*armfake.ManagedClustersServerTransport{},
		unavailable: map[string]bool{}}
	f.subs = subfake.NewServerTransport(&subfake.Server{
		NewListPager: func(*armsubscriptions.ClientListOptions) (resp azfake.PagerResponder[armsubscriptions.ClientListResponse]) {
			sub := func(id, tenant string) *armsubscriptions.Subscription {
				return &armsubscriptions.Subscription{SubscriptionID: to.Ptr(id), TenantID: to.Ptr(tenant), DisplayName: to.Ptr("sub " + id[:4]),
					State: to.Ptr(armsubscriptions.SubscriptionStateEnabled)}
			}
			resp.AddPage(http.StatusOK, armsubscriptions.ClientListResponse{SubscriptionListResult: armsubscriptions.SubscriptionListResult{
				Value: []*armsubscriptions.Subscription{sub(fleetSubA, tenantID), sub(fleetForbidden, tenantID)}}}, nil)
			resp.AddPage(http.StatusOK, armsubscriptions.ClientListResponse{SubscriptionListResult: armsubscriptions.SubscriptionListResult{
				// testSubscription is visible too, but the fleet's identity does not cover it.
				Value: []*armsubscriptions.Subscription{sub(fleetSubB, tenantID), sub(testSubscription, tenantID)}}}, nil)
			return
		},
	})
	for _, s := range []string{fleetSubA, fleetSubB, fleetForbidden, testSubscription} {
		f.set(s)
	}
	return f
}

// set gives sub its clusters, and a fresh fake, whose pager lists them from the first page.
func (f *fleetARM) set(sub string, clusters ...*armcontainerservice.ManagedCluster) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusters[sub] = clusters
	f.transports[sub] = armfake.NewManagedClustersServerTransport(&armfake.ManagedClustersServer{
		NewListPager: func(*armcontainerservice.ManagedClustersClientListOptions) (resp azfake.PagerResponder[armcontainerservice.ManagedClustersClientListResponse]) {
			f.mu.Lock()
			defer f.mu.Unlock()
			all := f.clusters[sub]
			for i := 0; i == 0 || i < len(all); i += fleetPage {
				resp.AddPage(http.StatusOK, armcontainerservice.ManagedClustersClientListResponse{ManagedClusterListResult: armcontainerservice.ManagedClusterListResult{
					Value: all[i:min(i+fleetPage, len(all))]}}, nil)
			}
			return
		},
		Get: func(_ context.Context, _, name string, _ *armcontainerservice.ManagedClustersClientGetOptions) (resp azfake.Responder[armcontainerservice.ManagedClustersClientGetResponse], errResp azfake.ErrorResponder) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, c := range f.clusters[sub] {
				if *c.Name == name {
					resp.SetResponse(http.StatusOK, armcontainerservice.ManagedClustersClientGetResponse{ManagedCluster: *c}, nil)
					return
				}
			}
			errResp.SetResponseError(http.StatusNotFound, "ResourceNotFound")
			return
		},
	})
}

// remove deletes the cluster named name from sub.
func (f *fleetARM) remove(sub, name string) {
	f.mu.Lock()
	var all []*armcontainerservice.ManagedCluster
	for _, c := range f.clusters[sub] {
		if *c.Name != name {
			all = append(all, c)
		}
	}
	f.mu.Unlock()
	f.set(sub, all...)
}

// setIdentity moves the cluster named name of sub onto clientID ("msi" for a managed identity).
func (f *fleetARM) setIdentity(sub, name, clientID string) {
	f.mu.Lock()
	var all []*armcontainerservice.ManagedCluster
	for _, c := range f.clusters[sub] {
		if *c.Name == name {
			c = fleetCluster(sub, name, clientID)
		}
		all = append(all, c)
	}
	f.mu.Unlock()
	f.set(sub, all...)
}

func (f *fleetARM) Do(req *http.Request) (*http.Response, error) {
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(segs) <= 2 { // /subscriptions, and the fake's next pages, /subscriptions/fake_page_N
		return f.subs.Do(req)
	}
	sub := strings.ToLower(segs[1])
	if sub == fleetForbidden {
		// As Resource Manager refuses: the SDK's fake keeps a pager that answered an error, and
		// would answer the next listing with no page at all.
		return &http.Response{StatusCode: http.StatusForbidden, Request: req, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"error":{"code":"AuthorizationFailed","message":"The client does not have authorization to perform action ` +
				`'Microsoft.ContainerService/managedClusters/read' over scope '/subscriptions/` + sub + `' or the scope is invalid."}}`))}, nil
	}
	f.mu.Lock()
	t, down := f.transports[sub], f.unavailable[sub]
	f.mu.Unlock()
	if down {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Request: req, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"error":{"code":"ServiceUnavailable","message":"The service is temporarily unavailable."}}`))}, nil
	}
	if t == nil {
		return &http.Response{StatusCode: http.StatusNotFound, Request: req, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"error":{"code":"SubscriptionNotFound","message":"not found"}}`))}, nil
	}
	return t.Do(req)
}

func (f *fleetARM) reader() *aks.Client {
	r, err := aks.New("https://management.azure.com", "https://management.core.windows.net/", f)
	if err != nil {
		panic(err)
	}
	return r
}

func fleetCluster(sub, name, clientID string) *armcontainerservice.ManagedCluster {
	return &armcontainerservice.ManagedCluster{
		ID:   to.Ptr("/subscriptions/" + sub + "/resourceGroups/rg-" + name + "/providers/Microsoft.ContainerService/managedClusters/" + name),
		Name: to.Ptr(name),
		Properties: &armcontainerservice.ManagedClusterProperties{
			ServicePrincipalProfile: &armcontainerservice.ManagedClusterServicePrincipalProfile{ClientID: to.Ptr(clientID)},
			ProvisioningState:       to.Ptr("Succeeded"),
			PowerState:              &armcontainerservice.PowerState{Code: to.Ptr(armcontainerservice.CodeRunning)},
		},
	}
}

// newFleetHarness is a harness whose reconciler keeps what fleets found and reads Resource
// Manager from a fleetARM of its own.
func newFleetHarness(t *testing.T) (*harness, *fleetARM) {
	h := newHarness(t)
	h.r.CheckTimeout = time.Minute
	h.r.Fleets = aksfleet.NewStore()
	arm := newFleetARM()
	h.r.Azure = clients.New(identities, graphAPI, arm.reader())
	return h, arm
}

// createFleet creates the harness's watch as a fleet of target in the test tenant, signing in
// as the ClusterAzureIdentity idName.
func (h *harness) createFleet(idName string, target v1alpha1.AKSFleetTarget) {
	h.t.Helper()
	target.TenantID = tenantID
	h.create("", func(spec *v1alpha1.CredentialWatchSpec) {
		spec.Target = v1alpha1.Target{AKSFleet: &target}
		spec.IdentityRef = &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: idName}
	})
}

// seed25 gives subscriptions A and B 25 clusters, six on a managed identity, the others on
// service principals whose first secrets are expired, within the critical or the warning
// threshold, or far off. It returns the sub/name of those on a service principal, and how many
// are in each state.
func (f *fleetARM) seed25(t *testing.T, now time.Time) (onSP []string, byState map[string]int) {
	left := []time.Duration{-5 * day, 3 * day, 20 * day, 100 * day} // Expired, Critical, Warning, Valid
	byState = map[string]int{}
	var sp int
	for i := range 25 {
		sub, name := fleetSubA, fmt.Sprintf("aks-%02d", i)
		if i >= 12 {
			sub = fleetSubB
		}
		clientID := "msi"
		if i%4 != 3 {
			s := seed(t, now, left[sp%4], 300*day, 200*day)
			clientID = s.appID
			byState[[]string{"Expired", "Critical", "Warning", "Valid"}[sp%4]]++
			sp++
			onSP = append(onSP, sub+"/"+name)
		}
		f.mu.Lock()
		f.clusters[sub] = append(f.clusters[sub], fleetCluster(sub, name, clientID))
		f.mu.Unlock()
	}
	f.set(fleetSubA, f.clusters[fleetSubA]...)
	f.set(fleetSubB, f.clusters[fleetSubB]...)
	return onSP, byState
}

// fleetIdentity may read the fleet's three subscriptions and every application of the tenant.
func fleetIdentity(t *testing.T) string {
	t.Helper()
	id := &v1alpha1.ClusterAzureIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-reader-" + strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))},
		Spec: v1alpha1.ClusterAzureIdentitySpec{
			IdentitySpec: v1alpha1.IdentitySpec{
				Operator: &v1alpha1.OperatorSignIn{},
				Allow: v1alpha1.IdentityAllow{
					Tenants: []string{tenantID}, Applications: []string{v1alpha1.AllApplications},
					Subscriptions: []v1alpha1.SubscriptionScope{{SubscriptionID: fleetSubA}, {SubscriptionID: fleetSubB}, {SubscriptionID: fleetForbidden}},
					Operations:    []v1alpha1.Operation{v1alpha1.OperationFleetScan},
				},
			},
			Conditions: []v1alpha1.NamespaceCondition{{NamespaceSelector: &metav1.LabelSelector{}}},
		},
	}
	if err := createSignedIn(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), id) })
	return id.Name
}

// TestAKSFleet: a fleet of 25 clusters in two subscriptions (six on a managed identity, the
// rest on service principals whose first secrets are expired, within the critical or the
// warning threshold, or far off) and a third subscription that refuses the identity.
func TestAKSFleet(t *testing.T) {
	needsAPIServer(t)
	h, arm := newFleetHarness(t)
	onSP, byState := arm.seed25(t, h.clock.Now())
	idName := fleetIdentity(t)
	h.createFleet(idName, v1alpha1.AKSFleetTarget{})

	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	assertCondition(t, w, v1alpha1.ConditionExpiring, metav1.ConditionTrue, v1alpha1.ReasonWithinCritical)
	assertCondition(t, w, v1alpha1.ConditionExpired, metav1.ConditionTrue, v1alpha1.ReasonCredentialExpired)
	want := v1alpha1.FleetStatus{Subscriptions: 3, Clusters: 25, ServicePrincipal: 19, ManagedIdentity: 6,
		Warning: int32(byState["Warning"]), Critical: int32(byState["Critical"]), Expired: int32(byState["Expired"])}
	assertFleetCounts(t, w, want)
	fs := w.Status.Fleet
	if len(fs.Unread) != 1 || fs.Unread[0].SubscriptionID != fleetForbidden || fs.Unread[0].Reason != "Forbidden" ||
		!strings.Contains(fs.Unread[0].Message, "Microsoft.ContainerService/managedClusters/read") {
		t.Errorf("unread = %+v, want %s refused, naming the permission it lacks", fs.Unread, fleetForbidden)
	}
	if len(fs.Attention) != 19 || fs.Attention[0].State != v1alpha1.StateExpired || fs.Attention[18].State != v1alpha1.StateValid {
		t.Fatalf("attention = %+v, want the 19 clusters on a service principal, expired first", fs.Attention)
	}
	for i := 1; i < len(fs.Attention); i++ {
		if fs.Attention[i].EarliestExpiry.Before(fs.Attention[i-1].EarliestExpiry) {
			t.Errorf("attention[%d] ends before attention[%d]: want nearest expiry first", i, i-1)
		}
	}
	if w.Status.State != v1alpha1.StateExpired || w.Status.EarliestExpiry == nil {
		t.Errorf("state %q, earliest expiry %v; want Expired and the first secret's end", w.Status.State, w.Status.EarliestExpiry)
	}
	events := h.takeEvents()
	if countPrefix(events, "Warning SubscriptionsUnread 1 subscriptions could not be read, such as "+fleetForbidden) != 1 {
		t.Errorf("events = %q, want one SubscriptionsUnread", events)
	}
	if n := countPrefix(events, "Warning Credential"); n != 0 {
		t.Errorf("%d state events on the first listing, want none: status and metrics say it", n)
	}

	// Every cluster has its series, more than status lists.
	scrape := scrapeFleet(t, h, w)
	if n := strings.Count(scrape, "\ncredwatch_aks_cluster_info{"); n != 25 {
		t.Errorf("%d credwatch_aks_cluster_info series, want 25:\n%s", n, scrape)
	}
	if n := strings.Count(scrape, "\ncredwatch_aks_cluster_credential_expiration_timestamp_seconds{"); n != 19 {
		t.Errorf("%d expiration series, want 19", n)
	}
	if n := strings.Count(scrape, `identity="ManagedIdentity"`); n != 6 {
		t.Errorf("%d clusters on a managed identity in the metrics, want 6", n)
	}

	// A restarted operator lists the fleet again at once, and tells nothing twice.
	h.r.Fleets = aksfleet.NewStore()
	w, _ = h.reconcile()
	assertFleetCounts(t, w, want)
	if events := h.takeEvents(); countPrefix(events, "Warning SubscriptionsUnread") != 0 || countPrefix(events, "Warning Credential") != 0 {
		t.Errorf("events after a restart = %q, want nothing told again", events)
	}

	// A cluster moves to a managed identity: it leaves the clusters to watch.
	first := strings.SplitN(onSP[0], "/", 2)
	arm.setIdentity(first[0], first[1], "msi")
	h.step(6*time.Hour + time.Minute)
	w, _ = h.reconcile()
	want.ServicePrincipal, want.ManagedIdentity, want.Expired = 18, 7, want.Expired-1
	assertFleetCounts(t, w, want)

	// The clock moves the states between checks: the warnings turn critical, the critical expire.
	h.step(18 * day)
	w, _ = h.reconcile()
	want.Expired, want.Critical, want.Warning = want.Expired+want.Critical, want.Warning, 0
	assertFleetCounts(t, w, want)
	// Ten clusters worsened: five told one by one, the rest in one event.
	events = h.takeEvents()
	if n := countPrefix(events, "Warning CredentialCritical AKS cluster /subscriptions/") + countPrefix(events, "Warning CredentialExpired AKS cluster /subscriptions/"); n != 5 ||
		countPrefix(events, "Warning MoreClustersWorsened 5 more clusters") != 1 {
		t.Errorf("events = %q, want five clusters told and one MoreClustersWorsened for five more", events)
	}

	// An admin narrows the identity to the first subscription: the other's clusters leave status
	// and metrics at the next reconcile, not at the next check.
	ctx := context.Background()
	id := &v1alpha1.ClusterAzureIdentity{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: idName}, id); err != nil {
		t.Fatal(err)
	}
	id.Spec.Allow.Subscriptions = []v1alpha1.SubscriptionScope{{SubscriptionID: fleetSubA}}
	if err := updateSignedIn(ctx, id); err != nil {
		t.Fatal(err)
	}
	h.step(time.Minute)
	w, _ = h.reconcile()
	if fs := w.Status.Fleet; fs.Clusters != 12 || fs.ServicePrincipal != 8 || fs.ManagedIdentity != 4 {
		t.Errorf("after narrowing: %d clusters, %d on a service principal, %d on a managed identity; want subscription A's 12, 8 and 4", fs.Clusters, fs.ServicePrincipal, fs.ManagedIdentity)
	}
	if u := w.Status.Fleet.Unread; len(u) != 0 {
		t.Errorf("unread = %+v after narrowing: a subscription the identity no longer covers is not the namespace's to read", u)
	}
	for _, c := range w.Status.Fleet.Attention {
		if c.SubscriptionID != fleetSubA {
			t.Errorf("attention lists %s, of a subscription the identity no longer covers", c.ID)
		}
	}
	if n := strings.Count(scrapeFleet(t, h, w), "\ncredwatch_aks_cluster_info{"); n != 12 {
		t.Errorf("%d credwatch_aks_cluster_info series after narrowing, want 12", n)
	}

	// And then takes FleetScan away: the fleet is refused, and forgotten.
	id.Spec.Allow.Operations = nil
	if err := updateSignedIn(ctx, id); err != nil {
		t.Fatal(err)
	}
	h.step(time.Minute)
	w, _ = h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed)
	if w.Status.Fleet != nil {
		t.Errorf("status.fleet = %+v after the identity refused the fleet, want none", w.Status.Fleet)
	}
	if scrape := scrapeFleet(t, h, w); strings.Contains(scrape, "credwatch_aks_cluster") {
		t.Errorf("the metrics still show the fleet's clusters:\n%s", scrape)
	}
}

func assertFleetCounts(t *testing.T, w *v1alpha1.CredentialWatch, want v1alpha1.FleetStatus) {
	t.Helper()
	got := w.Status.Fleet
	if got == nil {
		t.Fatalf("no status.fleet; conditions %+v", w.Status.Conditions)
	}
	g := *got
	g.Attention, g.Unread, g.Unlisted = nil, nil, 0
	if !reflect.DeepEqual(g, want) {
		t.Errorf("fleet counts = %+v, want %+v", g, want)
	}
}

func scrapeFleet(t *testing.T, h *harness, w *v1alpha1.CredentialWatch) string {
	t.Helper()
	list := func() ([]*v1alpha1.CredentialWatch, error) { return []*v1alpha1.CredentialWatch{w}, nil }
	handler := cwmetrics.NewWatches(list, tenantscan.NewStore(), h.r.Fleets, clock.RealClock{}).Handler(promhttp.HandlerFor(prometheus.NewRegistry(), promhttp.HandlerOpts{}))
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, cwmetrics.MetricsPath, nil))
	return "\n" + rec.Body.String()
}

func TestAKSFleetHoldsAtMostItsLimit(t *testing.T) {
	needsAPIServer(t)
	h, arm := newFleetHarness(t)
	h.r.FleetClusters = 5
	var clusters []*armcontainerservice.ManagedCluster
	for i := range 12 {
		clusters = append(clusters, fleetCluster(fleetSubA, fmt.Sprintf("aks-%02d", i), "msi"))
	}
	arm.set(fleetSubA, clusters...)
	h.createFleet(fleetIdentity(t), v1alpha1.AKSFleetTarget{Subscriptions: []string{fleetSubA}})
	for range 2 {
		w, _ := h.reconcile()
		if fs := w.Status.Fleet; fs == nil || fs.Clusters != 5 || fs.Uncounted != 7 || fs.Subscriptions != 1 {
			t.Fatalf("status.fleet = %+v, want 5 clusters held and 7 uncounted", fs)
		}
		if n := strings.Count(scrapeFleet(t, h, w), "\ncredwatch_aks_cluster_info{"); n != 5 {
			t.Errorf("%d credwatch_aks_cluster_info series, want the 5 held", n)
		}
		h.step(6*time.Hour + time.Minute)
	}
	if events := h.takeEvents(); countPrefix(events, "Warning FleetTruncated The fleet holds 5 clusters: 7 more were found") != 1 {
		t.Errorf("events = %q, want one FleetTruncated across two checks", events)
	}
}

// A namespace runs at most three fleets: the newest beyond them is refused, saying which run.
func TestAKSFleetsPerNamespace(t *testing.T) {
	needsAPIServer(t)
	ctx := context.Background()
	h, _ := newFleetHarness(t)
	idName := fleetIdentity(t)
	h.createFleet(idName, v1alpha1.AKSFleetTarget{})
	for _, name := range []string{"z1", "z2", "z3"} {
		w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: h.key.Namespace, Name: name}}
		w.Spec = *h.get().Spec.DeepCopy()
		if err := k8s.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := h.reconcile()
	assertCondition(t, w, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonChecked)
	last := client.ObjectKey{Namespace: h.key.Namespace, Name: "z3"}
	if _, err := reconcileFully(ctx, t, h.r, last); err != nil {
		t.Fatal(err)
	}
	var z3 v1alpha1.CredentialWatch
	if err := k8s.Get(ctx, last, &z3); err != nil {
		t.Fatal(err)
	}
	assertCondition(t, &z3, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTooManyFleets)
	if c := target.Condition(&z3, v1alpha1.ConditionReady); !strings.Contains(c.Message, "watch, z1, z2") {
		t.Errorf("Ready says %q: want the fleets that run named", c.Message)
	}
}
