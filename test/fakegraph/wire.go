package fakegraph

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxBody bounds what a request body may inflate to, so a broken client cannot exhaust memory
// through a gzip bomb.
const maxBody = 4 << 20

// errUnsupportedEncoding means the body uses a Content-Encoding Graph does not accept (415).
var errUnsupportedEncoding = errors.New("unsupported Content-Encoding")

// readBody returns the request body decompressed, because Kiota gzips every request body by
// default and Graph accepts that; any POST handler must read bodies through it.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	defer r.Body.Close()
	var rd io.Reader = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		rd = zr
	default:
		return nil, fmt.Errorf("%w %q", errUnsupportedEncoding, enc)
	}
	b, err := io.ReadAll(io.LimitReader(rd, maxBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxBody {
		return nil, fmt.Errorf("body larger than %d bytes", maxBody)
	}
	return b, nil
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newSecretText makes a secret shaped like Entra's: 40 characters with a "~" at the fourth.
func newSecretText() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
	var b [40]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	b[3] = '~'
	return string(b[:])
}

func newOpaqueToken() string {
	var b [48]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// field and object give JSON objects a fixed member order: Graph puts @odata annotations first
// and clients' golden tests and humans reading logs both like a stable order.
type field struct {
	k string
	v any
}

type object []field

func (o object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(f.k)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		v, err := json.Marshal(f.v)
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// graphContentType is what Graph sends on every JSON response.
const graphContentType = "application/json;odata.metadata=minimal;odata.streaming=true;IEEE754Compatible=false;charset=utf-8"

// graphCall carries the per-request headers Graph repeats in error bodies.
type graphCall struct {
	requestID, clientRequestID string
}

func startGraphCall(w http.ResponseWriter, r *http.Request) graphCall {
	c := graphCall{requestID: newUUID(), clientRequestID: r.Header.Get("client-request-id")}
	if c.clientRequestID == "" {
		c.clientRequestID = c.requestID
	}
	h := w.Header()
	h.Set("Content-Type", graphContentType)
	h.Set("request-id", c.requestID)
	h.Set("client-request-id", c.clientRequestID)
	h.Set("OData-Version", "4.0")
	h.Set("Cache-Control", "no-cache")
	h.Set("Strict-Transport-Security", "max-age=31536000")
	h.Set("x-ms-ags-diagnostic", `{"ServerInfo":{"DataCenter":"Local","Slice":"E","Ring":"5","ScaleUnit":"000","RoleInstance":"fakegraph"}}`)
	return c
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// graphError writes Graph's OData error body; clients (Kiota's ODataError) read code and message
// from it and support tickets quote the innerError IDs.
func (c graphCall) graphError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, object{{"error", object{
		{"code", code},
		{"message", message},
		{"innerError", object{
			{"date", time.Now().UTC().Format("2006-01-02T15:04:05")},
			{"request-id", c.requestID},
			{"client-request-id", c.clientRequestID},
		}},
	}}})
}

// entraError writes the login endpoint's error shape: a flat OAuth error with AADSTS codes, which
// MSAL surfaces verbatim in its error text.
func (s *Server) entraError(w http.ResponseWriter, r *http.Request, status int, oauthErr string, aadsts int, description string) {
	traceID := newUUID()
	corr := r.Header.Get("client-request-id")
	if corr == "" {
		corr = newUUID()
	}
	ts := time.Now().UTC().Format("2006-01-02 15:04:05Z")
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store, no-cache")
	h.Set("Pragma", "no-cache")
	h.Set("x-ms-request-id", traceID)
	h.Set("client-request-id", corr)
	writeJSON(w, status, object{
		{"error", oauthErr},
		{"error_description", fmt.Sprintf("AADSTS%d: %s Trace ID: %s Correlation ID: %s Timestamp: %s", aadsts, description, traceID, corr, ts)},
		{"error_codes", []int{aadsts}},
		{"timestamp", ts},
		{"trace_id", traceID},
		{"correlation_id", corr},
		{"error_uri", fmt.Sprintf("%s/error?code=%d", s.URL(), aadsts)},
	})
}

// statusRecorder remembers the status for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}
