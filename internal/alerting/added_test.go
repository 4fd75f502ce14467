package alerting

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alertkind"
)

// A credential added out of band is told once on each channel, beside its own schedule, and its
// ledger entry goes, untold, with the credential.
func TestAddedIsToldOnce(t *testing.T) {
	added := metav1.NewTime(now.Add(-time.Hour))
	c := v1alpha1.Credential{KeyID: "k9", Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceServicePrincipal,
		EndTime: metav1.NewTime(now.Add(700 * day)), AddedTime: &added}
	in := Inputs{Credentials: []v1alpha1.Credential{c}, Checked: true, Channels: []string{"slack", "mail"}, RemindBefore: DefaultRemindBefore}
	p := Decide(in, now)
	if len(p.Due) != 2 || p.Due[0].Kind != alertkind.CredentialAdded || p.Due[0].Subject != "added/ServicePrincipal/k9" || !p.Due[0].Step.Due.Equal(added.Time) {
		t.Fatalf("due %+v", p.Due)
	}
	in.Sent = []v1alpha1.SentAlert{sentAlert("slack", "added/ServicePrincipal/k9", "added", added.Time)}
	if p := Decide(in, now); len(p.Due) != 1 || p.Due[0].Channel != "mail" {
		t.Fatalf("after slack was told: %+v", p.Due)
	}
	in.Credentials = nil
	if p := Decide(in, now); len(p.Due) != 0 || len(p.Stale) != 1 || p.Stale[0].Subject != "added/ServicePrincipal/k9" {
		t.Fatalf("the credential gone: due %+v, stale %+v", p.Due, p.Stale)
	}
	in.Credentials = []v1alpha1.Credential{c}
	in.Credentials[0].AddedTime = nil
	if p := Decide(in, now); len(p.Due) != 0 {
		t.Fatalf("a credential there from the first check: %+v", p.Due)
	}
}
