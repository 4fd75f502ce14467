package rotation

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/credwatch/credwatch/internal/azerr"
	"github.com/credwatch/credwatch/internal/githubsecrets"
	"github.com/credwatch/credwatch/internal/keyvault"
)

// Permanent reports whether err is a refusal that retrying does not mend: Azure's 4xx other than
// a conflict, a timeout or throttling (GitHub's 403 with its rate limit too), a GitHub host the
// operator may not publish to, the API server refusing the Secret as invalid or
// forbidden, or a Secret changed under the rotation, which a person must put right.
func Permanent(err error) bool {
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || errors.Is(err, ErrForeign) || errors.Is(err, ErrSecretChanged) || errors.Is(err, ErrSinkForeign) || errors.Is(err, keyvault.ErrNotAVault) ||
		errors.Is(err, githubsecrets.ErrHostNotAllowed) {
		return true
	}
	var ae *azerr.Error
	// GitHub answers a rate limit with 403 as well as 429.
	if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 || ae.Kind == azerr.KindThrottled {
		return false
	}
	return ae.Status != http.StatusConflict && ae.Status != http.StatusTooManyRequests && ae.Status != http.StatusRequestTimeout
}
