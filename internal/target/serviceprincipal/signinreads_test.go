package serviceprincipal

import (
	"fmt"
	"testing"
	"time"

	"github.com/credwatch/credwatch/internal/graph"
	"github.com/credwatch/credwatch/internal/policy/policytest"
)

// However many watches ask, an application's sign-ins are read once an hour, and an identity asks
// the reports service at most graph.ReportsPer10s times in ten seconds.
func TestReportsAreShared(t *testing.T) {
	var r Reports
	reads := 0
	read := func() ([]graph.KeyUse, error) { reads++; return []graph.KeyUse{{KeyID: "k"}}, nil }
	now := policytest.Now
	for i := range 50 {
		// The watches ask over a minute, and each is told when the read was made.
		if uses, at, err, ok := r.Read("id", "app", now.Add(time.Duration(i)*time.Minute/50), read); !ok || err != nil || len(uses) != 1 || !at.Equal(now) {
			t.Fatalf("Read = %v, %v, %v, %v; want the read made at %v", uses, at, err, ok, now)
		}
	}
	if reads != 1 {
		t.Fatalf("50 watches of one application read %d times, want once", reads)
	}
	for i := range 10 {
		r.Read("id", fmt.Sprintf("other-%d", i), now, read)
	}
	if reads != graph.ReportsPer10s {
		t.Fatalf("%d reads of ten applications at once, want %d", reads, graph.ReportsPer10s)
	}
	if _, _, _, ok := r.Read("another identity", "app", now, read); !ok || reads != graph.ReportsPer10s+1 {
		t.Fatalf("another identity's allowance is spent by the first's (%d reads)", reads)
	}
	if _, _, _, ok := r.Read("id", "other-9", now.Add(10*time.Second), read); !ok {
		t.Fatal("the allowance does not refill")
	}
	if r.Read("id", "app", now.Add(SignInsEvery), read); reads != graph.ReportsPer10s+3 {
		t.Fatalf("an hour later the application is not read again (%d reads)", reads)
	}
}
