package target

import (
	"fmt"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
	"github.com/credwatch/credwatch/internal/policy"
)

// Settings are a watch's spec's durations and policies, parsed once a reconcile for every step.
type Settings struct {
	Interval          time.Duration
	Thresholds        policy.Thresholds
	RemindBefore      []time.Duration
	CheckFailureAfter time.Duration
	Hygiene           policy.Hygiene
	// Usage is spec.usage; zero without spec.usage.signIns.
	Usage policy.Usage
}

// SettingsOf parses spec; an error names the field that does not parse (the API server
// validates them all).
func SettingsOf(spec v1alpha1.CredentialWatchSpec) (Settings, error) {
	interval, err := spec.CheckInterval.Parse()
	if err != nil {
		return Settings{}, fmt.Errorf("checkInterval: %w", err)
	}
	thresholds, err := policy.ThresholdsOf(spec.Thresholds)
	if err != nil {
		return Settings{}, err
	}
	s := Settings{Interval: interval, Thresholds: thresholds, CheckFailureAfter: alerting.DefaultCheckFailureAfter}
	if s.Hygiene, err = policy.HygieneOf(spec.Hygiene); err != nil {
		return Settings{}, err
	}
	if s.Usage, err = policy.UsageOf(spec.Usage); err != nil {
		return Settings{}, err
	}
	var remind []v1alpha1.Duration
	if a := spec.Alerts; a != nil {
		remind = a.RemindBefore
		if a.CheckFailureAfter != "" {
			if s.CheckFailureAfter, err = a.CheckFailureAfter.Parse(); err != nil {
				return Settings{}, fmt.Errorf("alerts.checkFailureAfter: %w", err)
			}
		}
	}
	if s.RemindBefore, err = alerting.RemindBefore(remind); err != nil {
		return Settings{}, err
	}
	return s, nil
}
