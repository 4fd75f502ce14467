package controllers

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/aks"
	"github.com/credwatch/credwatch/internal/azure/clients"
	"github.com/credwatch/credwatch/internal/notify/channels"
	"github.com/credwatch/credwatch/internal/saissuer"
	"github.com/credwatch/credwatch/internal/target"
)

// armCalls is Resource Manager for a test that must not reach it: it counts calls and refuses.
type armCalls struct{ n atomic.Int32 }

func (a *armCalls) ReadCluster(context.Context, azcore.TokenCredential, aks.ClusterRef) (aks.Cluster, error) {
	a.n.Add(1)
	return aks.Cluster{}, fmt.Errorf("no cluster here")
}

func (a *armCalls) StartReset(context.Context, azcore.TokenCredential, aks.ClusterRef, aks.ServicePrincipal) (string, bool, error) {
	a.n.Add(1)
	return "", false, fmt.Errorf("no cluster here")
}

func (a *armCalls) ListSubscriptions(context.Context, azcore.TokenCredential, string) ([]aks.Subscription, error) {
	a.n.Add(1)
	return nil, fmt.Errorf("no subscription here")
}

func (a *armCalls) ListClusters(context.Context, azcore.TokenCredential, string, []string) ([]aks.ListedCluster, error) {
	a.n.Add(1)
	return nil, fmt.Errorf("no cluster here")
}

func (a *armCalls) PollReset(context.Context, azcore.TokenCredential, aks.ClusterRef, string) (bool, error) {
	a.n.Add(1)
	return false, fmt.Errorf("no cluster here")
}

// listener counts the connections made to it.
func listener(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return l.Addr().String(), &n
}

// TestNamespaceUserCannotSteerTheOperator: a user who may create watches (and Secrets) in one
// namespace, and nothing else, tries every field that used to make the operator act for them.
// Each try is refused with a condition that says why, and nothing reaches Graph, Resource
// Manager, a Secret they do not own, or an address inside the cluster.
func TestNamespaceUserCannotSteerTheOperator(t *testing.T) {
	needsAPIServer(t)
	ctx := context.Background()
	h := newHarness(t)
	dev := newNamespace(t)
	const user = "alice@dev"

	// The cluster admin's setup: alice edits watches and Secrets in dev; dev's watches may read
	// and rotate one application through an identity the admin made for them; another identity
	// serves prod only.
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: dev, Name: "cw-editor"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"credwatch.dev"}, Resources: []string{"credentialwatches"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: dev, Name: "cw-editor"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cw-editor"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}},
	} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	allowed := seed(t, h.clock.Now(), 5*day, 400*day, 400*day) // expiring: alerts fall due
	other := seed(t, h.clock.Now(), 100*day, 400*day, 400*day) // another team's application
	devID := &v1alpha1.ClusterAzureIdentity{ObjectMeta: metav1.ObjectMeta{Name: "dev-" + dev}}
	devID.Spec.Operator = &v1alpha1.OperatorSignIn{}
	devID.Spec.Allow = v1alpha1.IdentityAllow{Tenants: []string{tenantID}, Applications: []string{allowed.appID},
		Subscriptions: []v1alpha1.SubscriptionScope{{SubscriptionID: testSubscription, ResourceGroups: []string{"rg-dev"}}},
		Operations:    []v1alpha1.Operation{v1alpha1.OperationRotate}}
	devID.Spec.Conditions = []v1alpha1.NamespaceCondition{{Namespaces: []string{dev}}}
	prodID := operatorIdentity()
	prodID.Name = "prod-" + dev
	prodID.Spec.Conditions = []v1alpha1.NamespaceCondition{{Namespaces: []string{"prod"}}}
	for _, id := range []*v1alpha1.ClusterAzureIdentity{devID, prodID} {
		if err := createSignedIn(ctx, id); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(ctx, id) })
	}
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dev, Name: "db-password"}, Data: map[string][]byte{"password": []byte("s3cr3t")}}
	if err := k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}

	asUser := rest.CopyConfig(cfg)
	asUser.Impersonate = rest.ImpersonationConfig{UserName: user}
	alice, err := client.New(asUser, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// She cannot make herself an identity, nor widen one.
	mine := &v1alpha1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: dev, Name: "mine"}}
	mine.Spec.Operator = &v1alpha1.OperatorSignIn{}
	if err := alice.Create(ctx, mine); !apierrors.IsForbidden(err) {
		t.Errorf("alice creating an AzureIdentity: %v, want forbidden", err)
	}
	if err := alice.Update(ctx, devID); !apierrors.IsForbidden(err) {
		t.Errorf("alice widening the ClusterAzureIdentity: %v, want forbidden", err)
	}

	hookAddr, hookConns := listener(t)
	smtpAddr, smtpConns := listener(t)
	smtpHost, smtpPort, _ := net.SplitHostPort(smtpAddr)
	var port int32
	_, _ = fmt.Sscan(smtpPort, &port)
	if err := alice.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: dev, Name: "hooks"}, Data: map[string][]byte{
		"loopback": []byte("http://" + hookAddr + "/"), "metadata": []byte("http://169.254.169.254/metadata/identity/oauth2/token"),
	}}); err != nil {
		t.Fatal(err)
	}

	spTarget := func(appID string) v1alpha1.Target {
		return v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{TenantID: tenantID, ClientID: appID}}
	}
	rotate := func(secret string) *v1alpha1.Rotation {
		return &v1alpha1.Rotation{Enabled: true, SecretRef: v1alpha1.SecretName{Name: secret}}
	}
	hook := func(key string) *v1alpha1.Alerts {
		return &v1alpha1.Alerts{Webhook: &v1alpha1.WebhookAlerts{URLSecretRef: v1alpha1.SecretKeyRef{Name: "hooks", Key: key}}}
	}
	for _, tc := range []struct {
		name      string
		spec      v1alpha1.CredentialWatchSpec
		condition string
		reason    string
		says      string
	}{
		{name: "rotate another team's application into a Secret of hers",
			spec:      v1alpha1.CredentialWatchSpec{Target: spTarget(other.appID), Rotation: rotate("loot")},
			condition: v1alpha1.ConditionReady, reason: v1alpha1.ReasonIdentityNotAllowed, says: "allow.applications does not list appId " + other.appID},
		{name: "use an identity offered to prod only",
			spec:      v1alpha1.CredentialWatchSpec{Target: spTarget(allowed.appID), IdentityRef: &v1alpha1.IdentityRef{Kind: v1alpha1.KindClusterAzureIdentity, Name: prodID.Name}},
			condition: v1alpha1.ConditionReady, reason: v1alpha1.ReasonIdentityNotAllowed, says: "its conditions do not admit namespace " + dev},
		{name: "reset a cluster outside the identity's resource groups",
			spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{AKSCluster: &v1alpha1.AKSClusterTarget{TenantID: tenantID, SubscriptionID: testSubscription,
				ResourceGroup: "rg-prod", Name: "aks-prod"}}, Rotation: rotate("aks-sp")},
			condition: v1alpha1.ConditionReady, reason: v1alpha1.ReasonIdentityNotAllowed, says: "resourceGroups does not list resource group rg-prod"},
		{name: "scan the tenant",
			spec:      v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: tenantID}}},
			condition: v1alpha1.ConditionReady, reason: v1alpha1.ReasonIdentityNotAllowed, says: "allow.operations does not list TenantScan"},
		{name: "have a rotation overwrite a Secret credwatch did not create",
			spec:      v1alpha1.CredentialWatchSpec{Target: spTarget(allowed.appID), Rotation: rotate(theirs.Name)},
			condition: v1alpha1.ConditionRotating, reason: v1alpha1.ReasonRotationBlocked, says: "credwatch did not create it for this watch"},
		{name: "post alerts to a loopback address",
			spec:      v1alpha1.CredentialWatchSpec{Target: spTarget(allowed.appID), Alerts: hook("loopback")},
			condition: v1alpha1.ConditionAlertsDelivered, reason: v1alpha1.ReasonDestinationRefused, says: "refused by the operator's destination policy"},
		{name: "post alerts to the instance metadata service",
			spec:      v1alpha1.CredentialWatchSpec{Target: spTarget(allowed.appID), Alerts: hook("metadata")},
			condition: v1alpha1.ConditionAlertsDelivered, reason: v1alpha1.ReasonDestinationRefused, says: "refused by the operator's destination policy"},
		{name: "have the issuer checks contact an address inside",
			spec:      v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServiceAccountIssuer: &v1alpha1.ServiceAccountIssuerTarget{Endpoints: []string{"https://" + hookAddr}}}},
			condition: v1alpha1.ConditionReady, reason: v1alpha1.ReasonEndpointNotAllowed, says: "is not an API server of this cluster"},
		{name: "mail alerts through a loopback relay",
			spec: v1alpha1.CredentialWatchSpec{Target: spTarget(allowed.appID), Alerts: &v1alpha1.Alerts{Email: &v1alpha1.EmailAlerts{
				To: []string{"dev@example.com"}, SMTP: v1alpha1.SMTPServer{Host: smtpHost, Port: port, TLS: v1alpha1.SMTPNoTLS, From: "credwatch@example.com"}}}},
			condition: v1alpha1.ConditionAlertsDelivered, reason: v1alpha1.ReasonDestinationRefused, says: "refused by the operator's destination policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arm := &armCalls{}
			r := &CredentialWatchReconciler{Client: k8s, SecretReader: k8s, DefaultIdentity: devID.Name, Recorder: h.recorder, Clock: h.clock,
				Rand: func() float64 { return 0 }, Azure: clients.New(identities, graphAPI, arm),
				// The operator's destination policy as installed: no range allowed beyond the public.
				Channels: &channels.Builder{Secrets: k8s}, Scans: h.r.Scans, CheckTimeout: time.Second,
				Issuer: &saissuer.Prober{Config: cfg, Reader: k8s, Namespace: dev}}
			w := &v1alpha1.CredentialWatch{ObjectMeta: metav1.ObjectMeta{Namespace: dev, GenerateName: "try-"}, Spec: tc.spec}
			if err := alice.Create(ctx, w); err != nil {
				t.Fatalf("alice creating the watch: %v", err)
			}
			fake.ResetRequests()
			for range 3 {
				if _, err := reconcileFully(ctx, t, r, client.ObjectKeyFromObject(w)); err != nil {
					t.Fatal(err)
				}
				h.step(time.Minute)
			}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
				t.Fatal(err)
			}
			assertCondition(t, w, tc.condition, metav1.ConditionFalse, tc.reason)
			if c := target.Condition(w, tc.condition); !strings.Contains(c.Message, tc.says) {
				t.Errorf("%s says %q, want %q", tc.condition, c.Message, tc.says)
			}
			for _, req := range fake.Requests() {
				if req.IsBatch() {
					continue // its requests are logged on their own
				}
				if !strings.Contains(req.Path+"?"+req.RawQuery, allowed.appID) || req.Method != "GET" {
					t.Errorf("Graph received %s %s", req.Method, req.Path)
				}
			}
			if n := arm.n.Load(); n != 0 {
				t.Errorf("Resource Manager was called %d times", n)
			}
			if n := hookConns.Load() + smtpConns.Load(); n != 0 {
				t.Errorf("%d connections reached the listeners inside", n)
			}
			for _, name := range []string{"loot", "aks-sp"} {
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: dev, Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
					t.Errorf("Secret %s: %v, want none written", name, err)
				}
			}
			var got corev1.Secret
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(theirs), &got); err != nil || len(got.Data) != 1 || string(got.Data["password"]) != "s3cr3t" {
				t.Errorf("Secret db-password: %v %v, want it untouched", got.Data, err)
			}
		})
	}
}
