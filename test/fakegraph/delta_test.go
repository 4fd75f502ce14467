package fakegraph

import (
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// deltaRound follows a round from path to its deltaLink, and returns the objects it reported and
// the link.
func deltaRound(t *testing.T, s *Server, tok, path string) ([]map[string]any, string, int) {
	t.Helper()
	var got []map[string]any
	pages := 0
	for {
		r := do(t, s, http.MethodGet, path, tok, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.raw)
		}
		pages++
		for _, v := range r.body["value"].([]any) {
			got = append(got, v.(map[string]any))
		}
		if next, ok := r.body["@odata.nextLink"].(string); ok {
			if _, ok := r.body["@odata.deltaLink"]; ok {
				t.Fatal("a page holds both links")
			}
			path = strings.TrimPrefix(next, s.URL())
			continue
		}
		link, ok := r.body["@odata.deltaLink"].(string)
		if !ok {
			t.Fatalf("a page with neither link: %s", r.raw)
		}
		return got, strings.TrimPrefix(link, s.URL()), pages
	}
}

func TestDeltaRounds(t *testing.T) {
	s := newFixture(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	s.SetDeltaClock(clk)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	for i := 0; i < 150; i++ {
		s.PutApplication(tenantA, Object{DisplayName: "filler"})
	}

	first, link, pages := deltaRound(t, s, tok, "/v1.0/applications/delta?$select=id,appId,displayName,passwordCredentials")
	if len(first) != 151 || pages != 2 {
		t.Fatalf("first round: %d objects in %d pages, want 151 in 2", len(first), pages)
	}
	if _, ok := first[0]["keyCredentials"]; ok {
		t.Errorf("first round ignored $select: %v", keys(first[0]))
	}
	quiet, link, _ := deltaRound(t, s, tok, link)
	if len(quiet) != 0 {
		t.Fatalf("nothing changed, the round reported %v", quiet)
	}

	// A secret added through addPassword, a new application, a removed one, a renamed one.
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1.0/applications/"+appObjID+"/addPassword", strings.NewReader(`{"passwordCredential":{"displayName":"out of band"}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := s.Client().Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("addPassword: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	s.PutApplication(tenantA, Object{AppID: "f0000000-0000-0000-0000-000000000001", DisplayName: "new"})
	gone := s.appsInOrder(tenantA)[1]
	s.DeleteApplication(tenantA, gone.AppID)
	renamed := s.appsInOrder(tenantA)[2]
	renamed.DisplayName = "renamed"
	s.PutApplication(tenantA, renamed)

	changed, link, _ := deltaRound(t, s, tok, link)
	if len(changed) != 4 {
		t.Fatalf("round after four writes reported %d: %v", len(changed), changed)
	}
	if got := keys(changed[0]); strings.Join(got, ",") != "id,passwordCredentials" || changed[0]["id"] != appObjID {
		t.Errorf("an updated object shows its id and what was written, got %v", changed[0])
	}
	if pcs := changed[0]["passwordCredentials"].([]any); len(pcs) != 2 || pcs[1].(map[string]any)["secretText"] != nil {
		t.Errorf("the credentials written, never a secret's text: %v", pcs)
	}
	if changed[1]["appId"] != "f0000000-0000-0000-0000-000000000001" || changed[1]["passwordCredentials"] == nil {
		t.Errorf("a created object shows whole: %v", changed[1])
	}
	if changed[2]["id"] != gone.ID || changed[2]["@removed"].(map[string]any)["reason"] != "changed" {
		t.Errorf("a removed object shows @removed: %v", changed[2])
	}
	if strings.Join(keys(changed[3]), ",") != "displayName,id" {
		t.Errorf("a renamed object: %v", changed[3])
	}

	// Graph's change tracking trails writes: a change shows once past the lag, not before.
	s.SetDeltaLag(time.Minute)
	renamed.DisplayName = "late"
	s.PutApplication(tenantA, renamed)
	early, _, _ := deltaRound(t, s, tok, link)
	if len(early) != 0 {
		t.Fatalf("a write within the lag showed: %v", early)
	}
	clk.SetTime(clk.Now().Add(2 * time.Minute))
	late, _, _ := deltaRound(t, s, tok, link)
	if len(late) != 1 || late[0]["displayName"] != "late" {
		t.Fatalf("the write past the lag: %v", late)
	}
}

func TestDeltaStartsFromLatestAndForgets(t *testing.T) {
	s := newFixture(t)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	s.SetDeltaClock(clk)
	tok := mustToken(t, s, tenantA, reader, readerKey)

	none, link, _ := deltaRound(t, s, tok, "/v1.0/servicePrincipals/delta?$deltatoken=latest&$select=id,appId,passwordCredentials")
	if len(none) != 0 {
		t.Fatalf("latest lists no objects, got %v", none)
	}
	sp, _ := s.ServicePrincipal(tenantA, appID)
	sp.Passwords = nil
	s.PutServicePrincipal(tenantA, sp)
	got, _, _ := deltaRound(t, s, tok, link)
	if len(got) != 1 || got[0]["id"] != spObjID || len(got[0]["passwordCredentials"].([]any)) != 0 {
		t.Fatalf("a secret removed from the service principal: %v", got)
	}
	if _, ok := got[0]["appId"]; ok {
		t.Errorf("an update carries what changed, not the appId: %v", got[0])
	}

	s.ResetDeltaState(tenantA)
	checkGraphError(t, do(t, s, http.MethodGet, link, tok, nil), http.StatusGone, "resyncRequired", "Resync required")

	_, link, _ = deltaRound(t, s, tok, "/v1.0/servicePrincipals/delta?$deltatoken=latest")
	clk.SetTime(clk.Now().Add(8 * 24 * time.Hour))
	checkGraphError(t, do(t, s, http.MethodGet, link, tok, nil), http.StatusBadRequest, "syncStateNotFound", "delta token is expired")

	other := mustToken(t, s, tenantB, reader, readerKey)
	checkGraphError(t, do(t, s, http.MethodGet, link, other, nil), http.StatusBadRequest, "Request_BadRequest", "Unable to read the delta token")
}
