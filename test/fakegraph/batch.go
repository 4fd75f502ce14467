package fakegraph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
)

// maxBatch is how many requests Graph accepts in one $batch.
const maxBatch = 20

type batchRequest struct {
	ID        string            `json:"id"`
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	Body      json.RawMessage   `json:"body"`
	DependsOn []string          `json:"dependsOn"`
}

// batchHeaders are the sub-response headers Graph reports and clients act on.
var batchHeaders = []string{"Content-Type", "Location", "Retry-After", "x-ms-resource-unit",
	"x-ms-throttle-limit-percentage", "x-ms-throttle-scope", "x-ms-throttle-information"}

// batch answers POST /v1.0/$batch: each sub-request is routed, charged and throttled as if sent on
// its own, so one can be answered 429 while the others succeed. Graph may answer in any order,
// and the fake answers in reverse so a client that pairs responses by position fails here.
func (s *Server) batch(w http.ResponseWriter, r *http.Request, c graphCall, tok issuedToken) {
	if r.Method != http.MethodPost {
		c.graphError(w, http.StatusMethodNotAllowed, "Request_BadRequest", "Specified HTTP method is not allowed for the request target.")
		return
	}
	raw, err := readBody(r)
	if err != nil {
		c.graphError(w, http.StatusBadRequest, "BadRequest", "Invalid batch payload format.")
		return
	}
	var in struct {
		Requests []batchRequest `json:"requests"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || len(in.Requests) == 0 {
		c.graphError(w, http.StatusBadRequest, "BadRequest", "Invalid batch payload format.")
		return
	}
	if len(in.Requests) > maxBatch {
		c.graphError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("The number of requests in the batch exceeds the limit of %d.", maxBatch))
		return
	}
	seen := map[string]bool{}
	for _, br := range in.Requests {
		switch {
		case br.ID == "" || br.Method == "" || br.URL == "":
			c.graphError(w, http.StatusBadRequest, "BadRequest", "Each request in a batch needs an id, a method and a url.")
			return
		case seen[br.ID]:
			c.graphError(w, http.StatusBadRequest, "BadRequest", "Batch request ids must be unique: "+br.ID)
			return
		case len(br.DependsOn) > 0:
			c.graphError(w, http.StatusBadRequest, "BadRequest", "fakegraph does not implement dependsOn.")
			return
		case strings.HasPrefix(strings.TrimPrefix(br.URL, "/"), "$batch"):
			c.graphError(w, http.StatusBadRequest, "BadRequest", "A batch cannot contain a batch.")
			return
		case strings.Contains(br.URL, "://"):
			c.graphError(w, http.StatusBadRequest, "BadRequest", "Batch request urls are relative to the version: "+br.URL)
			return
		}
		seen[br.ID] = true
	}

	out := make([]object, len(in.Requests))
	for i, br := range in.Requests {
		out[len(out)-1-i] = s.batchStep(r, tok, br)
	}
	writeJSON(w, http.StatusOK, object{{"responses", out}})
}

func (s *Server) batchStep(outer *http.Request, tok issuedToken, br batchRequest) object {
	rec := httptest.NewRecorder()
	sub, err := http.NewRequestWithContext(outer.Context(), strings.ToUpper(br.Method), s.URL()+"/v1.0/"+strings.TrimPrefix(br.URL, "/"), bytes.NewReader(br.Body))
	if err != nil {
		c := startGraphCall(rec, outer)
		c.graphError(rec, http.StatusBadRequest, "BadRequest", "Invalid request URL: "+br.URL)
		return object{{"id", br.ID}, {"status", rec.Code}, {"body", json.RawMessage(rec.Body.Bytes())}}
	}
	for k, v := range br.Headers {
		sub.Header.Set(k, v)
	}
	s.route(rec, sub, startGraphCall(rec, sub), tok, splitPath(sub))
	s.logRequest(Request{Method: sub.Method, Path: sub.URL.Path, RawQuery: sub.URL.RawQuery, Status: rec.Code,
		ClientID: tok.clientID, TenantID: tok.tenantID, Batched: true})

	headers := object{}
	for _, h := range batchHeaders {
		if v := rec.Header().Get(h); v != "" {
			headers = append(headers, field{h, v})
		}
	}
	resp := object{{"id", br.ID}, {"status", rec.Code}, {"headers", headers}}
	if body := rec.Body.Bytes(); len(body) > 0 {
		resp = append(resp, field{"body", json.RawMessage(body)})
	}
	return resp
}
