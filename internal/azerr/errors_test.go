package azerr

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestErrorMessageLeavesOutResponseBodies(t *testing.T) {
	body := errors.New(`{"error":{"code":"Request_ResourceNotFound","message":"body text"}}`)
	tests := map[string]struct {
		err  *Error
		want string
	}{
		"answered with a code": {
			err:  &Error{Kind: KindNotFound, Status: 404, Code: "Request_ResourceNotFound", Err: body},
			want: "not found (HTTP 404, Request_ResourceNotFound)",
		},
		"answered without a code": {
			err:  &Error{Kind: KindUnavailable, Status: 503, Err: body},
			want: "unavailable (HTTP 503)",
		},
		"no answer: the transport says why": {
			err:  &Error{Kind: KindUnavailable, Err: errors.New("dial tcp 127.0.0.1:443: connect: connection refused")},
			want: "unavailable: dial tcp 127.0.0.1:443: connect: connection refused",
		},
		"refused, naming what is missing": {
			err:  &Error{Kind: KindForbidden, Status: 403, Code: "Authorization_RequestDenied", Needs: "Application.Read.All", Err: body},
			want: "access denied (HTTP 403, Authorization_RequestDenied); the identity needs Application.Read.All",
		},
		"nothing more known": {
			err:  &Error{Kind: KindThrottled},
			want: "throttled",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKindAndRetryAfterThroughWrapping(t *testing.T) {
	err := fmt.Errorf("reading application x: %w", &Error{Kind: KindThrottled, Status: 429, RetryAfter: 7 * time.Second})
	if KindOf(err) != KindThrottled || RetryAfterOf(err) != 7*time.Second {
		t.Errorf("KindOf = %v, RetryAfterOf = %v; want throttled, 7s", KindOf(err), RetryAfterOf(err))
	}
	plain := errors.New("boom")
	if KindOf(plain) != KindOther || RetryAfterOf(plain) != 0 {
		t.Errorf("an unclassified error: KindOf = %v, RetryAfterOf = %v; want error, 0", KindOf(plain), RetryAfterOf(plain))
	}
}

func TestNeedingNamesOnlyRefusals(t *testing.T) {
	tests := map[string]struct {
		err       *Error
		needs     string
		wantNeeds string
	}{
		"a refusal":                         {err: &Error{Kind: KindForbidden, Status: 403}, needs: "Application.Read.All", wantNeeds: "Application.Read.All"},
		"a refusal already naming its need": {err: &Error{Kind: KindForbidden, Status: 403, Needs: "User.Read.All"}, needs: "Application.Read.All", wantNeeds: "User.Read.All"},
		"not a refusal":                     {err: &Error{Kind: KindNotFound, Status: 404}, needs: "Application.Read.All"},
		"a sign-in failure":                 {err: &Error{Kind: KindUnauthenticated, Status: 401}, needs: "Application.Read.All"},
		"nothing to name":                   {err: &Error{Kind: KindForbidden, Status: 403}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := *tc.err
			got := tc.err.Needing(tc.needs)
			if got.Needs != tc.wantNeeds {
				t.Errorf("Needs = %q, want %q", got.Needs, tc.wantNeeds)
			}
			if *tc.err != before {
				t.Errorf("Needing changed the error it was given: %+v, was %+v", *tc.err, before)
			}
		})
	}
}
