package tenantscan

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

const day = 24 * time.Hour

var (
	now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	std = policy.Thresholds{Warning: 30 * day, Critical: 7 * day}
)

// scanned is a credential of app's application that started and ends at those offsets from now.
func scanned(app, key string, typ v1alpha1.CredentialType, start, end time.Duration) v1alpha1.Credential {
	s := metav1.NewTime(now.Add(start))
	return v1alpha1.Credential{AppID: app, KeyID: key, Type: typ, Source: v1alpha1.SourceApplication,
		StartTime: &s, EndTime: metav1.NewTime(now.Add(end))}
}

// onSP is c as its service principal's.
func onSP(c v1alpha1.Credential) v1alpha1.Credential {
	c.Source = v1alpha1.SourceServicePrincipal
	return c
}
