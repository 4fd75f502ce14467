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
		return v1alpha1.Credential{KeyID: key, Type: v1alpha1.CredentialTypePassword, DisplayName: name}
	}
	cert := v1alpha1.Credential{KeyID: "c1", Type: v1alpha1.CredentialTypeCertificate, DisplayName: "credwatch-rotation-1"}
	flagged := secret("k0", "old")
	flagged.AddedTime = &earlier
	tests := []struct {
		name   string
		before []v1alpha1.Credential
		now    []v1alpha1.Credential
		first  bool
		r      *v1alpha1.RotationStatus
		last   *v1alpha1.LastRotation
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
		{name: "a certificate of the rotation's name is not its secret", before: []v1alpha1.Credential{secret("k1", "ci")},
			now: []v1alpha1.Credential{secret("k1", "ci"), cert}, r: &v1alpha1.RotationStatus{DisplayName: "credwatch-rotation-1"}, want: "c1", kept: "c1"},
		{name: "the last rotation's secret", before: []v1alpha1.Credential{secret("k1", "ci")}, now: []v1alpha1.Credential{secret("k1", "ci"), secret("k9", "x")},
			last: &v1alpha1.LastRotation{KeyID: "k9"}},
		{name: "a mark is kept", before: []v1alpha1.Credential{flagged}, now: []v1alpha1.Credential{secret("k0", "old")}, kept: "k0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marked := MarkAdded(tt.now, tt.before, tt.first, tt.r, tt.last, at)
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
				}
			}
			if strings.Join(got, ",") != tt.want || strings.Join(kept, ",") != tt.kept {
				t.Errorf("marked %v, carrying %v; want %q, %q", got, kept, tt.want, tt.kept)
			}
		})
	}
}
