// Package policytest holds what the tests of several target kinds share of credentials and the
// clock: a fixed now, the default thresholds, and credentials that start and end at offsets from
// that now. It is for tests only.
package policytest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// Day is a day, for offsets.
const Day = 24 * time.Hour

var (
	// Now is the instant the tests' credentials are placed around.
	Now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	// Std are the default thresholds: Warning 30 days before the end, Critical 7.
	Std = policy.Thresholds{Warning: 30 * Day, Critical: 7 * Day}
)

// Credential is a credential of app's application that started and ends at those offsets from Now.
func Credential(app, key string, typ v1alpha1.CredentialType, start, end time.Duration) v1alpha1.Credential {
	s := metav1.NewTime(Now.Add(start))
	return v1alpha1.Credential{AppID: app, KeyID: key, Type: typ, Source: v1alpha1.SourceApplication,
		StartTime: &s, EndTime: metav1.NewTime(Now.Add(end))}
}
