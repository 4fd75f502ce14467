package msgraph

import (
	"errors"
	"time"

	abstractions "github.com/microsoft/kiota-abstractions-go"
	"github.com/microsoftgraph/msgraph-sdk-go/models/odataerrors"

	"github.com/credwatch/credwatch/internal/azerr"
)

// classify turns an SDK or transport error into an azerr.Error, a refusal naming needs; nil stays
// nil.
func classify(err error, needs string) error {
	if err == nil {
		return nil
	}
	var ge *azerr.Error
	if errors.As(err, &ge) {
		return ge.Needing(needs)
	}
	var odata *odataerrors.ODataError
	if errors.As(err, &odata) {
		ge := &azerr.Error{Status: odata.GetStatusCode(), Err: err}
		if main := odata.GetErrorEscaped(); main != nil {
			ge.Code = deref(main.GetCode())
		}
		ge.Kind = azerr.KindOfStatus(ge.Status)
		ge.RetryAfter = retryAfter(odata.GetResponseHeaders())
		return ge.Needing(needs)
	}
	var api *abstractions.ApiError
	if errors.As(err, &api) {
		ge := &azerr.Error{Kind: azerr.KindOfStatus(api.ResponseStatusCode), Status: api.ResponseStatusCode, RetryAfter: retryAfter(api.ResponseHeaders), Err: err}
		return ge.Needing(needs)
	}
	if ue := azerr.Unanswered(err); ue != nil {
		return ue
	}
	return &azerr.Error{Kind: azerr.KindOther, Err: err}
}

// retryAfter reads Retry-After from the headers Kiota keeps of a failed response.
func retryAfter(h *abstractions.ResponseHeaders) time.Duration {
	if h == nil {
		return 0
	}
	for _, v := range h.Get("Retry-After") {
		if d := azerr.RetryAfterSeconds(v); d > 0 {
			return d
		}
	}
	return 0
}
