package statuspatch

import (
	"encoding/json"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestStatusPatch(t *testing.T) {
	at := func(ns int) *metav1.Time {
		tm := metav1.NewTime(time.Date(2026, 12, 3, 9, 0, 0, ns, time.UTC))
		return &tm
	}
	for _, tc := range []struct {
		name          string
		before, after v1alpha1.CredentialWatchStatus
		want          string
	}{
		{"a field set", v1alpha1.CredentialWatchStatus{}, v1alpha1.CredentialWatchStatus{ExpiresIn: "12d"},
			`{"status":{"expiresIn":"12d"}}`},
		{"a field cleared", v1alpha1.CredentialWatchStatus{ExpiresIn: "12d", State: v1alpha1.StateValid}, v1alpha1.CredentialWatchStatus{State: v1alpha1.StateValid},
			`{"status":{"expiresIn":null}}`},
		// A merge patch merges objects: a field gone from within one must be written as null.
		{"a field cleared within an object",
			v1alpha1.CredentialWatchStatus{ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "a", DisplayName: "api"}},
			v1alpha1.CredentialWatchStatus{ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "a"}},
			`{"status":{"servicePrincipal":{"displayName":null}}}`},
		{"an object set", v1alpha1.CredentialWatchStatus{ExpiresIn: "12d"},
			v1alpha1.CredentialWatchStatus{ExpiresIn: "12d", ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "a"}},
			`{"status":{"servicePrincipal":{"appID":"a"}}}`},
		{"an object gone", v1alpha1.CredentialWatchStatus{ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "a"}}, v1alpha1.CredentialWatchStatus{},
			`{"status":{"servicePrincipal":null}}`},
		// and replaces lists whole.
		{"a list changed",
			v1alpha1.CredentialWatchStatus{ExpiresIn: "12d", Conditions: []metav1.Condition{{Type: "Ready", Status: "True"}, {Type: "Checked", Status: "True"}}},
			v1alpha1.CredentialWatchStatus{ExpiresIn: "12d", Conditions: []metav1.Condition{{Type: "Ready", Status: "False"}}},
			`{"status":{"conditions":[{"type":"Ready","status":"False","lastTransitionTime":null,"reason":"","message":""}]}}`},
		{"several fields, sorted",
			v1alpha1.CredentialWatchStatus{State: v1alpha1.StateValid, ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "a"}},
			v1alpha1.CredentialWatchStatus{ExpiresIn: "3d", ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "a", DisplayName: "api"}},
			`{"status":{"expiresIn":"3d","servicePrincipal":{"displayName":"api"},"state":null}}`},
		{"nothing changed", v1alpha1.CredentialWatchStatus{ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "a"}},
			v1alpha1.CredentialWatchStatus{ServicePrincipal: &v1alpha1.ServicePrincipalStatus{AppID: "a"}}, ""},
		// Times are written to the second: a difference below it is no change to write.
		{"the same to the second", v1alpha1.CredentialWatchStatus{LastCheckTime: at(1)}, v1alpha1.CredentialWatchStatus{LastCheckTime: at(2)},
			""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statusPatch(&tc.before, &tc.after)
			if err != nil || string(got) != tc.want {
				t.Errorf("statusPatch = %s, %v; want %s", got, err, tc.want)
			}
			// Applied as the API server does, the patch makes before after.
			from, _ := json.Marshal(tc.before)
			patched := from
			if got != nil {
				var whole struct{ Status json.RawMessage }
				if err := json.Unmarshal(got, &whole); err != nil {
					t.Fatal(err)
				}
				if patched, err = jsonpatch.MergePatch(from, whole.Status); err != nil {
					t.Fatal(err)
				}
			}
			var applied v1alpha1.CredentialWatchStatus
			if err := json.Unmarshal(patched, &applied); err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(tc.after)
			if have, _ := json.Marshal(applied); string(have) != string(want) {
				t.Errorf("before, patched: %s; want %s", have, want)
			}
		})
	}
}
