package issuer

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/saissuer"
	"github.com/credwatch/credwatch/internal/target"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func watch() *v1alpha1.CredentialWatch {
	next := metav1.NewTime(now.Add(time.Hour))
	return &v1alpha1.CredentialWatch{Spec: v1alpha1.CredentialWatchSpec{Target: v1alpha1.Target{ServiceAccountIssuer: &v1alpha1.ServiceAccountIssuerTarget{}}},
		Status: v1alpha1.CredentialWatchStatus{NextCheckTime: &next}}
}

func agreeing(issuer string, urls ...string) saissuer.Observation {
	var obs saissuer.Observation
	for _, u := range urls {
		obs.Endpoints = append(obs.Endpoints, saissuer.Endpoint{URL: u, Issuer: issuer, KeyIDs: []string{"k1"}, SigningKeyID: "k1"})
	}
	return obs
}

// A changed issuer is told once, and kept in status; agreeing keys raise no event.
func TestRecordIssuerChange(t *testing.T) {
	obj, events := watch(), &targettest.Events{}
	Record(obj, agreeing("https://old", "https://a", "https://b"), events, now)
	if got := events.Take(); len(got) != 0 {
		t.Fatalf("events %q; want none for a first look at agreeing servers", got)
	}
	Record(obj, agreeing("https://new", "https://a", "https://b"), events, now.Add(time.Hour))
	got := events.Take()
	if len(got) != 1 || !strings.HasPrefix(got[0], "Warning IssuerChanged The service-account issuer changed from https://old to https://new") {
		t.Fatalf("events %q", got)
	}
	st := obj.Status.ServiceAccountIssuer
	if st.Issuer != "https://new" || st.PreviousIssuer != "https://old" || st.IssuerChangeTime == nil || len(st.Endpoints) != 2 {
		t.Fatalf("status %+v", st)
	}
	c := target.Condition(obj, v1alpha1.ConditionReady)
	if c.Reason != v1alpha1.ReasonChecked || c.Message != "Read the service-account issuer of 2 API servers" {
		t.Fatalf("Ready %+v", c)
	}
	if d := target.Condition(obj, v1alpha1.ConditionSigningKeyDrift); d.Status != metav1.ConditionFalse || d.Reason != v1alpha1.ReasonKeysAgree {
		t.Fatalf("SigningKeyDrift %+v", d)
	}
}

// Status lists at most 16 API servers and keys each; the rejections of the canary token are
// named in a stable order.
func TestRecordBoundsEndpoints(t *testing.T) {
	var obs saissuer.Observation
	kids := make([]string, 20)
	for i := range kids {
		kids[i] = fmt.Sprintf("k%02d", i)
	}
	for i := range 20 {
		obs.Endpoints = append(obs.Endpoints, saissuer.Endpoint{URL: fmt.Sprintf("https://%02d", i), Issuer: "https://i", KeyIDs: kids, SigningKeyID: "k00",
			Rejected: map[string]string{"https://b": "expired", "https://a": "invalid\nbearer   token"}})
	}
	obj := watch()
	Record(obj, obs, &targettest.Events{}, now)
	eps := obj.Status.ServiceAccountIssuer.Endpoints
	if len(eps) != maxIssuerEndpoints || len(eps[0].KeyIDs) != maxEndpointKeyIDs {
		t.Fatalf("%d endpoints, %d keys; want %d and %d", len(eps), len(eps[0].KeyIDs), maxIssuerEndpoints, maxEndpointKeyIDs)
	}
	if want := "rejected by https://a: invalid bearer token; rejected by https://b: expired"; eps[0].Problem != want {
		t.Fatalf("problem %q; want %q", eps[0].Problem, want)
	}
}

func TestNotChecked(t *testing.T) {
	if r := target.ReasonFor(ErrNotChecked); r != v1alpha1.ReasonIssuerNotChecked || !strings.Contains(ErrNotChecked.Error(), "--service-account-issuer=false") {
		t.Fatalf("ErrNotChecked: reason %s, %q", r, ErrNotChecked)
	}
}
