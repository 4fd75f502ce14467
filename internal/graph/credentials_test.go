package graph

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUnitSnapshotTakesTheApplicationsName(t *testing.T) {
	var s Snapshot
	s.Add(Object{Source: ServicePrincipal, ObjectID: "sp", DisplayName: "copy", SingleSignOnMode: "saml", Credentials: []Credential{{KeyID: "c"}}})
	if s.DisplayName != "copy" {
		t.Errorf("name %q: want the service principal's while there is no application", s.DisplayName)
	}
	s.Add(Object{Source: Application, ObjectID: "app", DisplayName: "payments", Credentials: []Credential{{KeyID: "p"}}})
	if s.DisplayName != "payments" || s.ApplicationObjectID != "app" || s.ServicePrincipalObjectID != "sp" || s.SingleSignOnMode != "saml" || len(s.Credentials) != 2 {
		t.Errorf("snapshot %+v: want the application's name, both objects and both credentials", s)
	}
}

func TestUnitNewSecretPrintsNoText(t *testing.T) {
	s := NewSecret{KeyID: "k", Text: "s3cr3t-t3xt", Hint: "s3c", End: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if got := fmt.Sprintf(verb, s); strings.Contains(got, s.Text) {
			t.Errorf("%s prints the text: %s", verb, got)
		}
	}
}

func TestUnitFailedReadsAndGUIDs(t *testing.T) {
	boom := errors.New("boom")
	reads := FailedReads(3, boom)
	if len(reads) != 3 || !errors.Is(reads[2].Err, boom) {
		t.Errorf("reads %+v: want three, each failed", reads)
	}
	for s, want := range map[string]bool{
		"1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d":       true,
		"1B2C3D4E-5F60-4A7B-8C9D-0E1F2A3B4C5D":       true,
		"{1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d}":     false, // not as Graph writes them
		"1b2c3d4e5f604a7b8c9d0e1f2a3b4c5d":           false,
		"1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d' or 1": false, // nothing else reaches a $filter
		"": false,
	} {
		if got := IsGUID(s); got != want {
			t.Errorf("IsGUID(%q) = %v, want %v", s, got, want)
		}
	}
}
