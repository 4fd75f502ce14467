package controllers

import (
	"context"
	"time"

	"github.com/credwatch/credwatch/internal/imagepulls"
)

// reconcileImagePulls shows the incidents of the registries spec.imagePulls covers (imagepulls.Show).
func (r *CredentialWatchReconciler) reconcileImagePulls(_ context.Context, w *watchState) (time.Time, error) {
	return imagepulls.Show(w.obj, r.ImagePulls, r.Recorder, w.now), nil
}
