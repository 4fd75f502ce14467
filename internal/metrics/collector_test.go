package metrics

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/scans"
)

func watch(name string, creds []v1alpha1.Credential, ready metav1.ConditionStatus, failures int32) *v1alpha1.CredentialWatch {
	w := &v1alpha1.CredentialWatch{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "platform"},
		Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServicePrincipal: &v1alpha1.ServicePrincipalTarget{
			TenantID: "t", ClientID: "c-" + name}}},
		Status: v1alpha1.CredentialWatchStatus{Credentials: creds, ConsecutiveFailures: failures},
	}
	if ready != "" {
		w.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: ready}}
		last := metav1.NewTime(time.Unix(1_800_000_000, 0))
		w.Status.LastCheckTime = &last
	}
	return w
}

func rotated(w *v1alpha1.CredentialWatch) *v1alpha1.CredentialWatch {
	w.Status.State = v1alpha1.StateWarning
	w.Status.LastRotation = &v1alpha1.LastRotation{Time: metav1.NewTime(time.Unix(1_700_000_000, 0)), KeyID: "k0"}
	w.Status.Rotation = &v1alpha1.RotationStatus{Step: v1alpha1.StepRetiring}
	return w
}

func TestCollector(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	creds := []v1alpha1.Credential{
		{KeyID: "k1", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication, EndTime: metav1.NewTime(time.Unix(1_900_000_000, 0))},
		{KeyID: "k2", Type: v1alpha1.CredentialTypeCertificate, Source: v1alpha1.SourceServicePrincipal, EndTime: metav1.NewTime(time.Unix(2_000_000_000, 0))},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		rotated(watch("ok", creds, metav1.ConditionTrue, 0)),
		watch("new", nil, "", 0),
		watch("failing", nil, metav1.ConditionFalse, 3),
	).Build()

	want := `
# HELP credwatch_credential_expiration_timestamp_seconds The date after which the credential expires, as a Unix timestamp.
# TYPE credwatch_credential_expiration_timestamp_seconds gauge
credwatch_credential_expiration_timestamp_seconds{client_id="c-ok",key_id="k1",name="ok",namespace="platform",source="Application",type="Password"} 1.9e+09
credwatch_credential_expiration_timestamp_seconds{client_id="c-ok",key_id="k2",name="ok",namespace="platform",source="ServicePrincipal",type="Certificate"} 2e+09
# HELP credwatch_watch_consecutive_check_failures Failed checks of the watch since its last successful one; absent while checks succeed.
# TYPE credwatch_watch_consecutive_check_failures gauge
credwatch_watch_consecutive_check_failures{client_id="c-failing",name="failing",namespace="platform"} 3
# HELP credwatch_watch_last_check_timestamp_seconds When Microsoft Graph was last read successfully for the watch, as a Unix timestamp.
# TYPE credwatch_watch_last_check_timestamp_seconds gauge
credwatch_watch_last_check_timestamp_seconds{client_id="c-failing",name="failing",namespace="platform"} 1.8e+09
credwatch_watch_last_check_timestamp_seconds{client_id="c-ok",name="ok",namespace="platform"} 1.8e+09
# HELP credwatch_watch_last_rotation_timestamp_seconds When the watch last completed a rotation of its secret, as a Unix timestamp.
# TYPE credwatch_watch_last_rotation_timestamp_seconds gauge
credwatch_watch_last_rotation_timestamp_seconds{client_id="c-ok",name="ok",namespace="platform"} 1.7e+09
# HELP credwatch_watch_rotation_in_progress 1 while a rotation is in progress, labelled with its step; absent otherwise.
# TYPE credwatch_watch_rotation_in_progress gauge
credwatch_watch_rotation_in_progress{client_id="c-ok",name="ok",namespace="platform",step="Retiring"} 1
# HELP credwatch_watch_state The worst state of the watch's credentials: 1, labelled with the state (Valid, Warning, Critical, Expired); absent before the first check.
# TYPE credwatch_watch_state gauge
credwatch_watch_state{client_id="c-ok",name="ok",namespace="platform",state="Warning"} 1
# HELP credwatch_watch_ready_status The Ready condition of a CredentialWatch: 1, labelled with the condition's status (True, False, Unknown).
# TYPE credwatch_watch_ready_status gauge
credwatch_watch_ready_status{client_id="c-failing",condition="False",name="failing",namespace="platform"} 1
credwatch_watch_ready_status{client_id="c-new",condition="Unknown",name="new",namespace="platform"} 1
credwatch_watch_ready_status{client_id="c-ok",condition="True",name="ok",namespace="platform"} 1
`
	if err := testutil.CollectAndCompare(NewCollector(c, scans.New()), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestCollectorReportsEveryCredentialOfATenantScan(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	scan := func(name string, listed ...v1alpha1.Credential) *v1alpha1.CredentialWatch {
		return &v1alpha1.CredentialWatch{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "platform"},
			Spec:       v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{TenantScan: &v1alpha1.TenantScanTarget{TenantID: "t"}}},
			Status:     v1alpha1.CredentialWatchStatus{Credentials: listed},
		}
	}
	cred := func(app, key string, end int64) v1alpha1.Credential {
		return v1alpha1.Credential{AppID: app, KeyID: key, Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication,
			EndTime: metav1.NewTime(time.Unix(end, 0))}
	}
	expiring := cred("app-1", "k1", 1_800_000_000)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		scan("scanned", expiring),
		// Scanned by another replica, the leader: only its status is known here.
		scan("elsewhere", cred("app-3", "k3", 1_700_000_000)),
	).Build()
	store := scans.New()
	store.Put(types.NamespacedName{Namespace: "platform", Name: "scanned"}, []v1alpha1.Credential{expiring, cred("app-2", "k2", 1_900_000_000)})

	want := `
# HELP credwatch_credential_expiration_timestamp_seconds The date after which the credential expires, as a Unix timestamp.
# TYPE credwatch_credential_expiration_timestamp_seconds gauge
credwatch_credential_expiration_timestamp_seconds{client_id="app-1",key_id="k1",name="scanned",namespace="platform",source="Application",type="Password"} 1.8e+09
credwatch_credential_expiration_timestamp_seconds{client_id="app-2",key_id="k2",name="scanned",namespace="platform",source="Application",type="Password"} 1.9e+09
credwatch_credential_expiration_timestamp_seconds{client_id="app-3",key_id="k3",name="elsewhere",namespace="platform",source="Application",type="Password"} 1.7e+09
`
	if err := testutil.CollectAndCompare(NewCollector(c, store), strings.NewReader(want), "credwatch_credential_expiration_timestamp_seconds"); err != nil {
		t.Error(err)
	}
}

func TestGraphRequestsCountsFailuresToo(t *testing.T) {
	reg := prometheus.NewRegistry()
	g, err := NewGraphRequests(reg)
	if err != nil {
		t.Fatal(err)
	}
	rt := g.RoundTripper(roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/down" {
			return nil, errors.New("connection refused")
		}
		return &http.Response{StatusCode: http.StatusTooManyRequests, Body: http.NoBody}, nil
	}))
	for _, path := range []string{"/a", "/a", "/down"} {
		req, _ := http.NewRequest(http.MethodGet, "https://graph.example"+path, nil)
		if resp, err := rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	want := `
# HELP credwatch_graph_requests_total HTTP requests sent to Microsoft Graph, by response status code ("error" when none arrived).
# TYPE credwatch_graph_requests_total counter
credwatch_graph_requests_total{code="429"} 2
credwatch_graph_requests_total{code="error"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if _, err := NewGraphRequests(reg); err == nil {
		t.Error("registering the counter twice succeeded")
	}
}
