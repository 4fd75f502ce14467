package fakegraph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"
)

type batchReply struct {
	status    int
	err       string
	responses map[string]batchResponse
	order     []string
}

type batchResponse struct {
	ID      string            `json:"id"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    map[string]any    `json:"body"`
}

func postBatch(t *testing.T, s *Server, tok string, requests []map[string]any) batchReply {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"requests": requests})
	req, _ := http.NewRequest("POST", s.URL()+"/v1.0/$batch", bytes.NewReader(payload))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := batchReply{status: resp.StatusCode, responses: map[string]batchResponse{}}
	var body struct {
		Responses []batchResponse `json:"responses"`
		Error     struct{ Message string }
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("batch answer is not JSON: %v\n%s", err, raw)
	}
	out.err = body.Error.Message
	for _, r := range body.Responses {
		out.responses[r.ID] = r
		out.order = append(out.order, r.ID)
	}
	return out
}

func get(id, url string) map[string]any { return map[string]any{"id": id, "method": "GET", "url": url} }

func TestBatchAnswersEachRequestOnItsOwn(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	s.ResetRequests()
	r := postBatch(t, s, tok, []map[string]any{
		get("app", "/applications(appId='"+appID+"')?$select=id,passwordCredentials"),
		get("sp", "servicePrincipals(appId='"+appID+"')?$select=id,passwordCredentials"),
		get("gone", "/applications(appId='99999999-0000-0000-0000-000000000000')"),
	})
	if r.status != http.StatusOK {
		t.Fatalf("$batch: %d %s", r.status, r.err)
	}
	if got := r.responses["app"]; got.Status != 200 || got.Body["id"] != appObjID || got.Headers["x-ms-resource-unit"] != "1" {
		t.Errorf("app: %+v", got)
	}
	if got := r.responses["sp"]; got.Status != 200 || got.Body["id"] != spObjID {
		t.Errorf("sp: %+v", got)
	}
	if got := r.responses["gone"]; got.Status != 404 || got.Body["error"] == nil {
		t.Errorf("missing app: %+v, want its own 404", got)
	}
	if fmt.Sprint(r.order) == "[app sp gone]" {
		t.Error("responses in request order; Graph promises no order and the fake must not either")
	}
	var outer, inner int
	for _, req := range s.Requests() {
		if req.Batched {
			inner++
		} else {
			outer++
		}
	}
	if outer != 1 || inner != 3 {
		t.Errorf("logged %d requests and %d sub-requests, want 1 and 3", outer, inner)
	}
}

func TestBatchThrottlesSubRequests(t *testing.T) {
	s := newFixture(t)
	s.SetBudget(3, clocktesting.NewFakeClock(start))
	tok := mustToken(t, s, tenantA, reader, readerKey)
	var reqs []map[string]any
	for i := range 4 {
		reqs = append(reqs, get(fmt.Sprint(i), "/servicePrincipals(appId='"+appID+"')"))
	}
	r := postBatch(t, s, tok, reqs)
	if r.status != http.StatusOK {
		t.Fatalf("$batch: %d %s", r.status, r.err)
	}
	throttled := 0
	for _, resp := range r.responses {
		if resp.Status == http.StatusTooManyRequests {
			throttled++
			if resp.Headers["Retry-After"] == "" {
				t.Errorf("a throttled sub-request without Retry-After: %+v", resp)
			}
		}
	}
	if throttled != 1 || s.Throttled() != 1 {
		t.Errorf("%d sub-requests throttled (server counted %d), want the fourth of four on a budget of 3", throttled, s.Throttled())
	}
}

func TestBatchRejectsMalformedBatches(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	sp := "/servicePrincipals(appId='" + appID + "')"
	var twentyOne []map[string]any
	for i := range 21 {
		twentyOne = append(twentyOne, get(fmt.Sprint(i), sp))
	}
	tests := []struct {
		name     string
		requests []map[string]any
	}{
		{"empty", nil},
		{"over 20", twentyOne},
		{"duplicate ids", []map[string]any{get("1", sp), get("1", sp)}},
		{"no url", []map[string]any{{"id": "1", "method": "GET"}}},
		{"absolute url", []map[string]any{get("1", s.GraphURL()+sp)}},
		{"nested batch", []map[string]any{get("1", "/$batch")}},
		{"dependsOn", []map[string]any{get("1", sp), {"id": "2", "method": "GET", "url": sp, "dependsOn": []string{"1"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := postBatch(t, s, tok, tt.requests); r.status != http.StatusBadRequest || r.err == "" {
				t.Errorf("got %d %q, want 400 with a message", r.status, r.err)
			}
		})
	}
}

func TestBatchAnswersABadURLOnItsOwn(t *testing.T) {
	s := newFixture(t)
	tok := mustToken(t, s, tenantA, reader, readerKey)
	r := postBatch(t, s, tok, []map[string]any{
		get("bad", "/applications(appId='x')%zz"),
		get("good", "/servicePrincipals(appId='"+appID+"')"),
	})
	if r.status != http.StatusOK || r.responses["bad"].Status != http.StatusBadRequest || r.responses["good"].Status != http.StatusOK {
		t.Errorf("got %d, bad %d, good %d; want 200 holding a 400 and a 200", r.status, r.responses["bad"].Status, r.responses["good"].Status)
	}
}

// TestBatchRefusesADeniedClientPerRequest: Graph accepts a $batch from any signed-in client and
// authorizes each of its requests on its own, answering each refused one with the OData error body
// a request sent alone gets.
func TestBatchRefusesADeniedClientPerRequest(t *testing.T) {
	s := newFixture(t)
	const denied = "aaaaaaaa-0000-0000-0000-00000000dead"
	s.AddClient(tenantA, denied, "denied-secret")
	tok := mustToken(t, s, tenantA, denied, "denied-secret")
	s.Deny(denied, true)
	r := postBatch(t, s, tok, []map[string]any{
		get("app", "/applications(appId='"+appID+"')"),
		get("sp", "/servicePrincipals(appId='"+appID+"')"),
	})
	if r.status != http.StatusOK {
		t.Fatalf("$batch: %d %s, want 200 holding the refusals", r.status, r.err)
	}
	for _, id := range []string{"app", "sp"} {
		got := r.responses[id]
		if got.Status != http.StatusForbidden || !strings.HasPrefix(got.Headers["Content-Type"], "application/json") {
			t.Errorf("%s: status %d, headers %v; want 403 with a JSON body", id, got.Status, got.Headers)
		}
		e, _ := got.Body["error"].(map[string]any)
		inner, _ := e["innerError"].(map[string]any)
		if len(got.Body) != 1 || len(e) != 3 || e["code"] != "Authorization_RequestDenied" ||
			e["message"] != "Insufficient privileges to complete the operation." {
			t.Errorf("%s: body %v, want Graph's {error: {code, message, innerError}}", id, got.Body)
		}
		if inner["date"] == nil || inner["request-id"] == nil || inner["client-request-id"] == nil {
			t.Errorf("%s: innerError %v, want date, request-id and client-request-id", id, inner)
		}
	}
}
