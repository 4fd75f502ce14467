package azerr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// KindOfStatus sorts an HTTP status the way every Azure API uses it.
func KindOfStatus(status int) Kind {
	switch {
	case status == http.StatusNotFound:
		return KindNotFound
	case status == http.StatusForbidden:
		return KindForbidden
	case status == http.StatusUnauthorized:
		return KindUnauthenticated
	case status == http.StatusTooManyRequests:
		return KindThrottled
	case status >= 500:
		return KindUnavailable
	default:
		return KindOther
	}
}

// RetryAfterSeconds reads a Retry-After header in whole seconds, the form Graph and Resource
// Manager send; 0 when absent or unreadable.
func RetryAfterSeconds(v string) time.Duration {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}

// Unanswered classifies a request that got no answer, nil if err is not one.
func Unanswered(err error) *Error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		// The URL, query and all, would bury the reason in a condition message; the host is enough.
		host := urlErr.URL
		if u, perr := url.Parse(urlErr.URL); perr == nil {
			host = u.Host
		}
		return &Error{Kind: KindUnavailable, Err: fmt.Errorf("no answer from %s: %w", host, urlErr.Err)}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: KindUnavailable, Err: err}
	}
	return nil
}

// Credential sorts the sign-in failures of the credential it wraps before an SDK wraps them, so
// that a wrong secret (KindUnauthenticated, with Entra's AADSTS code) is told apart from a login
// endpoint that does not answer (KindUnavailable) and from an identity that is not set up at all.
type Credential struct{ azcore.TokenCredential }

// GetToken implements azcore.TokenCredential.
func (c Credential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	tok, err := c.TokenCredential.GetToken(ctx, opts)
	if err == nil {
		return tok, nil
	}
	var authErr *azidentity.AuthenticationFailedError
	if errors.As(err, &authErr) && authErr.RawResponse != nil {
		// Only the codes are kept: error_description is free text from the server.
		return tok, &Error{Kind: KindUnauthenticated, Status: authErr.RawResponse.StatusCode, Code: tokenErrorCode(authErr.RawResponse), Err: err}
	}
	if ue := Unanswered(err); ue != nil {
		return tok, ue
	}
	// Typically DefaultAzureCredential finding no identity: its text lists what it tried, which
	// is what a person needs to set workload identity up. It holds no secret; it is flattened
	// to one line for conditions and events.
	return tok, &Error{Kind: KindUnauthenticated, Err: oneLine{err}}
}

// oneLine prints an error on one line, and keeps it for errors.As: a credential's own error
// (such as a ServiceAccount token that could not be minted) is what a caller sorts by.
type oneLine struct{ err error }

func (o oneLine) Error() string { return strings.Join(strings.Fields(o.err.Error()), " ") }
func (o oneLine) Unwrap() error { return o.err }

// tokenErrorCode reads Entra's error and first AADSTS code from a token response, such as
// "invalid_client AADSTS7000215" (a wrong secret) or "invalid_client AADSTS7000222" (expired).
func tokenErrorCode(resp *http.Response) string {
	body, err := runtime.Payload(resp)
	if err != nil {
		return ""
	}
	var e struct {
		Error      string `json:"error"`
		ErrorCodes []int  `json:"error_codes"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	if len(e.ErrorCodes) > 0 {
		return fmt.Sprintf("%s AADSTS%d", e.Error, e.ErrorCodes[0])
	}
	return e.Error
}
