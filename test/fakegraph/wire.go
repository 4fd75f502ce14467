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

func defaultProps(set *entitySet) []string {
	if set.sps {
		return []string{"id", "deletedDateTime", "accountEnabled", "appDisplayName", "appId", "displayName", "servicePrincipalType", "keyCredentials", "passwordCredentials"}
	}
	return []string{"id", "deletedDateTime", "appId", "displayName", "keyCredentials", "passwordCredentials"}
}

// render builds the JSON of one object. Properties fakegraph does not model are null when
// selected, as Graph returns unset properties. secretText is always null: Graph returns it only
// from addPassword. key is filled only when $select names keyCredentials, on one object or a list.
func render(set *entitySet, o Object, selected []string, withKey bool) object {
	props := selected
	if props == nil {
		props = defaultProps(set)
	}
	out := make(object, 0, len(props))
	for _, p := range props {
		var v any
		switch p {
		case "id":
			v = o.ID
		case "appId":
			v = o.AppID
		case "displayName":
			v = nullable(o.DisplayName)
		case "appDisplayName":
			v = nullable(o.DisplayName)
		case "tags":
			v = append([]string{}, o.Tags...)
		case "preferredSingleSignOnMode":
			v = nullable(o.PreferredSingleSignOnMode)
		case "appOwnerOrganizationId":
			v = nullable(o.AppOwnerOrganizationID)
		case "accountEnabled":
			v = true
		case "servicePrincipalType":
			v = "Application"
		case "passwordCredentials":
			pcs := make([]object, 0, len(o.Passwords))
			for _, pc := range o.Passwords {
				pcs = append(pcs, object{
					{"customKeyIdentifier", nil},
					{"displayName", nullable(pc.DisplayName)},
					{"endDateTime", graphTime(pc.End)},
					{"hint", nullable(pc.Hint)},
					{"keyId", pc.KeyID},
					{"secretText", nil},
					{"startDateTime", graphTime(pc.Start)},
				})
			}
			v = pcs
		case "keyCredentials":
			kcs := make([]object, 0, len(o.Keys))
			for _, kc := range o.Keys {
				var key any
				if withKey {
					key = base64OrNull(kc.Key)
				}
				kcs = append(kcs, object{
					{"customKeyIdentifier", base64OrNull(kc.CustomKeyIdentifier)},
					{"displayName", nullable(kc.DisplayName)},
					{"endDateTime", graphTime(kc.End)},
					{"key", key},
					{"keyId", kc.KeyID},
					{"startDateTime", graphTime(kc.Start)},
					{"type", nullable(kc.Type)},
					{"usage", nullable(kc.Usage)},
				})
			}
			v = kcs
		}
		out = append(out, field{p, v})
	}
	return out
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func base64OrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return base64.StdEncoding.EncodeToString(b)
}

// graphTime writes Edm.DateTimeOffset as Graph does: UTC with a Z.
func graphTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}
