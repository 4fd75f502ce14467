package target

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/ledger"
	"github.com/credwatch/credwatch/internal/target/targettest"
)

// A ledger the watch cannot use is said in AlertsDelivered, and by event once; whatever else
// failed is the reconcile's to retry.
func TestLedgerRefused(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		err     error
		says    string // empty: returned
		returns bool
	}{
		"a foreign ConfigMap":  {err: &ledger.ForeignError{Name: "credwatch-ledger-x-01"}, says: "the watch does not control it"},
		"writes forbidden":     {err: fmt.Errorf("claiming: %w", &ledger.ForbiddenError{Namespace: "team-a"}), says: "lists the namespace in the chart's ledgerNamespaces"},
		"the API server fails": {err: errors.New("connection refused"), returns: true},
	} {
		t.Run(name, func(t *testing.T) {
			obj := &v1alpha1.CredentialWatch{}
			events := &targettest.Events{}
			for range 2 {
				next, err := LedgerRefused(obj, events, tc.err, now)
				if tc.returns {
					if err == nil {
						t.Fatal("the failure was not returned")
					}
					return
				}
				if err != nil || !next.Equal(now.Add(MisconfiguredRecheck)) {
					t.Fatalf("LedgerRefused = %v, %v; want a look again later", next, err)
				}
			}
			c := Condition(obj, v1alpha1.ConditionAlertsDelivered)
			if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, tc.says) {
				t.Errorf("AlertsDelivered %+v, want False saying %q", c, tc.says)
			}
			if got := events.Take(); len(got) != 1 {
				t.Errorf("events %q, want one", got)
			}
		})
	}
}
