package policy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func TestMarkAdded(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	earlier := metav1.NewTime(at.Add(-48 * time.Hour))
	secret := func(key, name string) v1alpha1.Credential {
		return v1alpha1.Credential{KeyID: key, Type: v1alpha1.CredentialTypePassword, Source: v1alpha1.SourceApplication, DisplayName: name}
	}
	cert := v1alpha1.Credential{KeyID: "c1", Type: v1alpha1.CredentialTypeCertificate, Source: v1alpha1.SourceApplication, DisplayName: "credwatch-rotation-1"}
	onSP := func(c v1alpha1.Credential) v1alpha1.Credential { c.Source = v1alpha1.SourceServicePrincipal; return c }
	flagged := secret("k0", "old")
	flagged.AddedTime, flagged.AddedBy = &earlier, "user someone@contoso.example"
	tests := []struct {
		name   string
		before []v1alpha1.Credential
		now    []v1alpha1.Credential
		first  bool
		r      *v1alpha1.RotationStatus
		last   *v1alpha1.LastRotation
		own    bool   // every application secret is another watch's rotation's
		want   string // keyIds marked now
		kept   string // keyIds carrying an AddedTime after
	}{
		{name: "nothing new", before: []v1alpha1.Credential{secret("k1", "ci")}, now: []v1alpha1.Credential{secret("K1", "ci")}},
		{name: "a secret added by hand", before: []v1alpha1.Credential{secret("k1", "ci")}, now: []v1alpha1.Credential{secret("k1", "ci"), secret("k2", "by hand")},
			want: "k2", kept: "k2"},
		{name: "the first check marks nothing", now: []v1alpha1.Credential{secret("k1", "ci"), secret("k2", "by hand")}, first: true},
		{name: "an application with no credentials gains one", now: []v1alpha1.Credential{secret("k2", "by hand")}, want: "k2", kept: "k2"},
		{name: "the rotation's secret, by keyId", before: []v1alpha1.Credential{secret("k1", "ci")}, now: []v1alpha1.Credential{secret("k1", "ci"), secret("k9", "x")},
			r: &v1alpha1.RotationStatus{KeyID: "K9"}},
		{name: "the rotation's secret, by its name before its keyId is recorded", before: []v1alpha1.Credential{secret("k1", "ci")},
			now: []v1alpha1.Credential{secret("k1", "ci"), secret("k9", "credwatch-rotation-1")}, r: &v1alpha1.RotationStatus{DisplayName: "credwatch-rotation-1"}},
		{name: "a secret named as the rotation's once its keyId is recorded is someone else's", before: []v1alpha1.Credential{secret("k1", "ci")},
			now: []v1alpha1.Credential{secret("k1", "ci"), secret("k8", "credwatch-rotation-1"), secret("k9", "credwatch-rotation-1")},
			r:   &v1alpha1.RotationStatus{KeyID: "k9", DisplayName: "credwatch-rotation-1"}, want: "k8", kept: "k8"},
		{name: "a secret named as the rotation's on the service principal is someone else's", before: []v1alpha1.Credential{secret("k1", "ci")},
			now: []v1alpha1.Credential{secret("k1", "ci"), onSP(secret("k9", "credwatch-rotation-1"))}, r: &v1alpha1.RotationStatus{DisplayName: "credwatch-rotation-1"},
			want: "k9", kept: "k9"},
		{name: "a keyId reused on the other object is another credential", before: []v1alpha1.Credential{secret("k1", "ci")},
			now: []v1alpha1.Credential{secret("k1", "ci"), onSP(secret("k1", "copy"))}, want: "k1", kept: "k1"},
		{name: "another watch's rotation made it", before: []v1alpha1.Credential{secret("k1", "ci")},
			now: []v1alpha1.Credential{secret("k1", "ci"), secret("k7", "credwatch-other-20261207T090000Z")}, own: true},
		{name: "a certificate of the rotation's name is not its secret", before: []v1alpha1.Credential{secret("k1", "ci")},
			now: []v1alpha1.Credential{secret("k1", "ci"), cert}, r: &v1alpha1.RotationStatus{DisplayName: "credwatch-rotation-1"}, want: "c1", kept: "c1"},
		{name: "the last rotation's secret", before: []v1alpha1.Credential{secret("k1", "ci")}, now: []v1alpha1.Credential{secret("k1", "ci"), secret("k9", "x")},
			last: &v1alpha1.LastRotation{KeyID: "k9"}},
		{name: "a mark is kept", before: []v1alpha1.Credential{flagged}, now: []v1alpha1.Credential{secret("k0", "old")}, kept: "k0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			own := func(v1alpha1.Credential) bool { return tt.own }
			marked := MarkAdded(tt.now, tt.before, tt.first, tt.r, tt.last, own, at)
			var got, kept []string
			for _, c := range marked {
				got = append(got, c.KeyID)
				if !c.AddedTime.Equal(&at) {
					t.Errorf("%s marked at %v", c.KeyID, c.AddedTime)
				}
			}
			for _, c := range tt.now {
				if c.AddedTime != nil {
					kept = append(kept, c.KeyID)
					if c.KeyID == "k0" && c.AddedBy != flagged.AddedBy {
						t.Errorf("who added k0 was lost: %q", c.AddedBy)
					}
				}
			}
			if strings.Join(got, ",") != tt.want || strings.Join(kept, ",") != tt.kept {
				t.Errorf("marked %v, carrying %v; want %q, %q", got, kept, tt.want, tt.kept)
			}
		})
	}
}
