package budget

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// unreadableBatchCost charges a $batch whose requests cannot be read as the largest Graph accepts
// (20) of its dearest reads: overcharging only slows credwatch, undercharging throttles the tenant.
const unreadableBatchCost = 20 * 3

// maxBatchAnswer bounds how much of a $batch answer is read to find its throttled requests.
const maxBatchAnswer = 8 << 20

func isBatch(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/$batch")
}

// batchCost reads the batch through GetBody, leaving the body to be sent untouched.
func batchCost(r *http.Request) int {
	if r.GetBody == nil {
		return unreadableBatchCost
	}
	body, err := r.GetBody()
	if err != nil {
		return unreadableBatchCost
	}
	defer func() { _ = body.Close() }() // its answer is read: a failed close tells nothing more
	raw, err := decoded(body, r.Header.Get("Content-Encoding"))
	if err != nil {
		return unreadableBatchCost
	}
	var batch struct {
		Requests []struct{ Method, URL string }
	}
	if json.Unmarshal(raw, &batch) != nil || len(batch.Requests) == 0 {
		return unreadableBatchCost
	}
	total := 0
	for _, sub := range batch.Requests {
		u, err := url.Parse(sub.URL)
		if err != nil {
			return unreadableBatchCost
		}
		// Batch URLs are relative to the version, with or without a leading slash.
		total += costOf(sub.Method, "/"+strings.TrimPrefix(u.Path, "/"), u.RawQuery)
	}
	return total
}

// replayable returns r, or when its body can be read only once (as a body Kiota builds) a clone
// carrying the body in memory, so that the batch can be costed and still be sent. The caller's
// request is left as RoundTrip's contract requires: its body consumed and closed.
func replayable(r *http.Request) (*http.Request, error) {
	if r.GetBody != nil || r.Body == nil || r.Body == http.NoBody {
		return r, nil
	}
	raw, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	clone := r.Clone(r.Context())
	clone.Body = io.NopCloser(bytes.NewReader(raw))
	clone.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	return clone, nil
}

type subResponse struct {
	status int
	header http.Header
}

// subResponseHeaders reads the status and headers of each answer in a $batch response, and puts
// the body back for the caller.
func subResponseHeaders(resp *http.Response) []subResponse {
	orig := resp.Body
	raw, err := io.ReadAll(io.LimitReader(orig, maxBatchAnswer+1))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(raw), orig), orig}
	if err != nil || len(raw) > maxBatchAnswer {
		return nil
	}
	plain, err := decoded(bytes.NewReader(raw), resp.Header.Get("Content-Encoding"))
	if err != nil {
		return nil
	}
	var answer struct {
		Responses []struct {
			Status  int
			Headers map[string]string
		}
	}
	if json.Unmarshal(plain, &answer) != nil {
		return nil
	}
	out := make([]subResponse, 0, len(answer.Responses))
	for _, a := range answer.Responses {
		h := http.Header{}
		for k, v := range a.Headers {
			h.Set(k, v)
		}
		out = append(out, subResponse{a.Status, h})
	}
	return out
}

func decoded(r io.Reader, encoding string) ([]byte, error) {
	if strings.EqualFold(strings.TrimSpace(encoding), "gzip") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		defer func() { _ = zr.Close() }() // Read reported any corruption already
		r = zr
	}
	b, err := io.ReadAll(io.LimitReader(r, maxBatchAnswer+1))
	if err == nil && len(b) > maxBatchAnswer {
		err = errors.New("larger than a $batch can be")
	}
	return b, err
}
