package compose

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// A cluster-wide refusal names the secret that expired last before it, however recently.
func TestCredentialCause(t *testing.T) {
	now := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	checked := metav1.NewTime(now.Add(-time.Hour))
	secret := func(name string, end time.Time) v1alpha1.Credential {
		return v1alpha1.Credential{Type: v1alpha1.CredentialTypePassword, DisplayName: name, EndTime: metav1.NewTime(end)}
	}
	tests := []struct {
		name  string
		creds []v1alpha1.Credential
		want  string
	}{
		{"expired seconds ago", []v1alpha1.Credential{secret("rbac", now.Add(-20*time.Second))},
			`The client secret "rbac" of the service principal expired less than a minute ago: this is why.`},
		{"expired hours ago", []v1alpha1.Credential{secret("old", now.Add(-5*time.Hour)), secret("rbac", now.Add(-2*time.Hour))},
			`The client secret "rbac" of the service principal expired 2h ago: this is why.`},
		{"all valid", []v1alpha1.Credential{secret("rbac", now.Add(time.Hour))},
			"The service principal's credentials are all valid: look at the registry's AcrPull role assignment and at the cluster's servicePrincipalProfile."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &v1alpha1.CredentialWatch{Status: v1alpha1.CredentialWatchStatus{LastCheckTime: &checked, Credentials: tt.creds}}
			if got := credentialCause(w, now); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// A node-local incident's wording agrees with the number of nodes that pull, as in a two-node
// cluster where one kubelet lost its credential.
func TestNodeLocalPullProblem(t *testing.T) {
	now := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	for pulling, want := range map[int32]string{1: "while 1 other node pulls from it", 3: "while 3 other nodes pull from it"} {
		p := v1alpha1.PullIncident{Registry: "myacr.azurecr.io", Scope: v1alpha1.PullScopeNodeLocal, Nodes: []string{"node-2"}, FailingNodes: 1, PullingNodes: pulling}
		if got := PullProblem(&v1alpha1.CredentialWatch{}, p, now); !strings.Contains(got, want) {
			t.Errorf("%d pulling: %s, want %q", pulling, got, want)
		}
	}
}
