package target

import (
	"strings"
	"testing"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/alerting"
)

// std is a spec's thresholds as the API server defaults them.
var std = v1alpha1.Thresholds{Warning: "30d", Critical: "7d"}

func TestSettingsOf(t *testing.T) {
	s, err := SettingsOf(v1alpha1.CredentialWatchSpec{CheckInterval: "1h", Thresholds: std})
	if err != nil || s.Interval != time.Hour || s.CheckFailureAfter != alerting.DefaultCheckFailureAfter || len(s.RemindBefore) != len(alerting.DefaultRemindBefore) {
		t.Fatalf("SettingsOf = %+v, %v; want the defaults", s, err)
	}
	s, err = SettingsOf(v1alpha1.CredentialWatchSpec{CheckInterval: "1h", Thresholds: std, Alerts: &v1alpha1.Alerts{CheckFailureAfter: "2h", RemindBefore: []v1alpha1.Duration{"1d", "7d"}}})
	if err != nil || s.CheckFailureAfter != 2*time.Hour || s.RemindBefore[0] != 7*24*time.Hour {
		t.Fatalf("SettingsOf = %+v, %v; want the spec's, latest reminder first", s, err)
	}
	for field, spec := range map[string]v1alpha1.CredentialWatchSpec{
		"checkInterval":            {CheckInterval: "soon", Thresholds: std},
		"alerts.checkFailureAfter": {CheckInterval: "1h", Thresholds: std, Alerts: &v1alpha1.Alerts{CheckFailureAfter: "later"}},
	} {
		if _, err := SettingsOf(spec); err == nil || !strings.HasPrefix(err.Error(), field+":") {
			t.Errorf("SettingsOf(%s) = %v; want an error naming it", field, err)
		}
	}
}
