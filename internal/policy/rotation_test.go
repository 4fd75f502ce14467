package policy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

func password(id, name string, source v1alpha1.CredentialSource, left time.Duration) v1alpha1.Credential {
	return v1alpha1.Credential{KeyID: id, DisplayName: name, Type: v1alpha1.CredentialTypePassword, Source: source, EndTime: metav1.NewTime(now.Add(left))}
}

func TestRotationDueAt(t *testing.T) {
	tests := map[string]struct {
		creds []v1alpha1.Credential
		want  time.Duration
	}{
		"the newest application secret decides": {
			creds: []v1alpha1.Credential{password("old", "", v1alpha1.SourceApplication, 10*day), password("new", "", v1alpha1.SourceApplication, 200*day)},
			want:  170 * day,
		},
		"secrets on the service principal and certificates do not count": {
			creds: []v1alpha1.Credential{password("a", "", v1alpha1.SourceApplication, 40*day), password("sp", "", v1alpha1.SourceServicePrincipal, 400*day),
				{KeyID: "cert", Type: v1alpha1.CredentialTypeCertificate, Source: v1alpha1.SourceApplication, EndTime: metav1.NewTime(now.Add(500 * day))}},
			want: 10 * day,
		},
		"no secret at all: now": {creds: nil, want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RotationDueAt(tc.creds, 30*day, now).Sub(now); got != tc.want {
				t.Errorf("due at now+%v, want now+%v", got, tc.want)
			}
		})
	}
	if !RotationRequested("2026-12-02", nil) || RotationRequested("2026-12-02", &v1alpha1.LastRotation{Request: "2026-12-02"}) || RotationRequested("", nil) {
		t.Error("RotationRequested: a new annotation value asks once, an answered or empty one not at all")
	}
}

func TestRetirable(t *testing.T) {
	newEnd := 365 * day
	creds := []v1alpha1.Credential{
		password("new", "credwatch-abc-2", v1alpha1.SourceApplication, newEnd),
		password("ours", "credwatch-abc-1", v1alpha1.SourceApplication, 20*day),
		password("theirs", "terraform", v1alpha1.SourceApplication, 20*day),
		password("other-watch", "credwatch-def-1", v1alpha1.SourceApplication, 20*day),
		password("sp", "credwatch-abc-0", v1alpha1.SourceServicePrincipal, 20*day),
		password("later", "credwatch-abc-9", v1alpha1.SourceApplication, 400*day),
	}
	ids := func(cs []v1alpha1.Credential) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.KeyID)
		}
		return strings.Join(out, ",")
	}
	if got := ids(Retirable(creds, []string{"credwatch-abc-"}, "new", now.Add(newEnd), v1alpha1.RemoveOldCreatedByCredwatch)); got != "ours" {
		t.Errorf("CreatedByCredwatch retires %q, want only this watch's older application secret", got)
	}
	if got := Retirable(creds, []string{"credwatch-abc-"}, "new", now.Add(newEnd), v1alpha1.RemoveOldNever); len(got) != 0 {
		t.Errorf("Never retires %v", got)
	}
}

func TestBackoffs(t *testing.T) {
	if PropagationBackoff(1) != 5*time.Second || PropagationBackoff(3) != 20*time.Second || PropagationBackoff(100) != 2*time.Minute {
		t.Error("PropagationBackoff: want 5s, doubling, capped at 2m")
	}
	if ClusterBackoff(1) != time.Hour || ClusterBackoff(2) != 2*time.Hour || ClusterBackoff(100) != 24*time.Hour {
		t.Error("ClusterBackoff: want 1h × 2^(n−1), capped at 24h")
	}
}

func TestInWindow(t *testing.T) {
	// now is Wednesday 2026-12-02 12:00 UTC.
	tests := map[string]struct {
		w        *v1alpha1.MaintenanceWindow
		wantIn   bool
		wantNext time.Duration
	}{
		"no window: always":   {w: nil, wantIn: true},
		"daily, open now":     {w: &v1alpha1.MaintenanceWindow{Start: "11:00", Duration: "2h"}, wantIn: true},
		"daily, later today":  {w: &v1alpha1.MaintenanceWindow{Start: "14:30", Duration: "1h"}, wantNext: 2*time.Hour + 30*time.Minute},
		"daily, closed today": {w: &v1alpha1.MaintenanceWindow{Start: "02:00", Duration: "4h"}, wantNext: 14 * time.Hour},
		"Saturdays only":      {w: &v1alpha1.MaintenanceWindow{Days: []v1alpha1.Weekday{"Saturday"}, Start: "02:00", Duration: "4h"}, wantNext: 2*day + 14*time.Hour},
		"overnight from Tuesday 22:00, still open": {
			w: &v1alpha1.MaintenanceWindow{Days: []v1alpha1.Weekday{"Tuesday"}, Start: "22:00", Duration: "16h"}, wantIn: true,
		},
		"in Amsterdam (UTC+1 in December)": {
			w: &v1alpha1.MaintenanceWindow{Start: "14:00", Duration: "1h", TimeZone: "Europe/Amsterdam"}, wantNext: time.Hour,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in, next, err := InWindow(tc.w, now)
			if err != nil {
				t.Fatal(err)
			}
			if in != tc.wantIn || (!in && next.Sub(now) != tc.wantNext) {
				t.Errorf("InWindow = %v, next now+%v; want %v, now+%v", in, next.Sub(now), tc.wantIn, tc.wantNext)
			}
		})
	}
	if _, _, err := InWindow(&v1alpha1.MaintenanceWindow{Start: "02:00", Duration: "1h", TimeZone: "Mars/Olympus"}, now); err == nil {
		t.Error("an unknown time zone was accepted")
	}
}

func TestSecretOwned(t *testing.T) {
	const name, uid = "payments", "2b9c0c1e-4d8e-4f1a-9c1b-1f0e2d3c4b5a"
	ours := map[string]string{LabelManagedBy: ManagedByCredwatch}
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        bool
	}{
		{"created for this watch", ours, map[string]string{AnnotationWatch: name}, true},
		{"created for another watch", ours, map[string]string{AnnotationWatch: "billing"}, false},
		{"written by an earlier version for this watch", ours, map[string]string{AnnotationSecretOld: WatchPrefix(uid) + "20261203t090000z"}, true},
		{"written by an earlier version for another watch", ours, map[string]string{AnnotationSecretOld: WatchPrefix("ffffffff-0000") + "x"}, false},
		{"another watch's, claiming this one's old secret", ours, map[string]string{AnnotationWatch: "billing", AnnotationSecretOld: WatchPrefix(uid) + "x"}, false},
		{"someone else's Secret", map[string]string{"app": "payments"}, nil, false},
		{"someone else's, with the watch annotation but not the label", nil, map[string]string{AnnotationWatch: name}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SecretOwned(tc.labels, tc.annotations, name, uid); got != tc.want {
				t.Errorf("SecretOwned = %v, want %v", got, tc.want)
			}
		})
	}
}

// A watch's secrets are named the same when it is created again, and differently for a watch of
// another name, namespace, cluster or AKS cluster.
func TestSecretPrefix(t *testing.T) {
	p := SecretPrefix("c1", "team-a", "payments", "")
	if p != SecretPrefix("c1", "team-a", "payments", "") || !strings.HasPrefix(p, CredwatchPrefix) || len(p) != len(CredwatchPrefix)+17 {
		t.Fatalf("SecretPrefix = %q", p)
	}
	aks := SecretPrefix("c1", "team-a", "payments", "sub/rg-prod/aks-prod")
	if aks == p || aks != SecretPrefix("c1", "team-a", "payments", "SUB/rg-prod/AKS-prod") {
		t.Errorf("the AKS cluster's prefix %q: want it apart from the service principal's and blind to case", aks)
	}
	for _, other := range []string{SecretPrefix("c2", "team-a", "payments", ""), SecretPrefix("c1", "team-b", "payments", ""), SecretPrefix("c1", "team-a", "billing", ""),
		SecretPrefix("c1", "team-a/payments", "", "")} {
		if other == p {
			t.Errorf("%q names another watch's secrets too", other)
		}
	}
}
