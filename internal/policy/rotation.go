package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// RotationSettings are a watch's rotation durations, parsed.
type RotationSettings struct {
	RotateBefore, Validity, GracePeriod time.Duration
}

// RotationSettingsOf parses the durations of a rotation spec.
func RotationSettingsOf(r v1alpha1.Rotation) (RotationSettings, error) {
	var s RotationSettings
	for _, d := range []struct {
		name string
		in   v1alpha1.Duration
		out  *time.Duration
		def  time.Duration
	}{
		{"rotateBefore", r.RotateBefore, &s.RotateBefore, 30 * day},
		{"validity", r.Validity, &s.Validity, 365 * day},
		{"gracePeriod", r.GracePeriod, &s.GracePeriod, 7 * day},
	} {
		if d.in == "" {
			*d.out = d.def
			continue
		}
		v, err := d.in.Parse()
		if err != nil {
			return s, fmt.Errorf("rotation.%s: %w", d.name, err)
		}
		*d.out = v
	}
	return s, nil
}

// NewestSecretEnd is when the application's longest-lived client secret ends: the one a rotation
// would have put in place. Zero when the application has none.
func NewestSecretEnd(creds []v1alpha1.Credential) time.Time {
	var newest time.Time
	for _, c := range creds {
		if c.Source == v1alpha1.SourceApplication && c.Type == v1alpha1.CredentialTypePassword && c.EndTime.After(newest) {
			newest = c.EndTime.Time
		}
	}
	return newest
}

// RotationDueAt is when a rotation falls due: rotateBefore ahead of the end of the application's
// newest secret, so that no rotation starts while a fresh secret is in place; now when the
// application has no secret at all.
func RotationDueAt(creds []v1alpha1.Credential, rotateBefore time.Duration, now time.Time) time.Time {
	newest := NewestSecretEnd(creds)
	if newest.IsZero() {
		return now
	}
	return newest.Add(-rotateBefore)
}

// RotationRequested reports whether the rotate annotation asks for a rotation not yet done.
func RotationRequested(annotation string, last *v1alpha1.LastRotation) bool {
	return annotation != "" && (last == nil || last.Request != annotation)
}

// SecretPrefix starts the display name of every secret a watch's rotations create. It is hashed
// from the cluster's ID (its kube-system namespace's UID), the watch's namespace and name, and
// the AKS cluster the secrets are reset onto (empty for a service principal): a watch deleted and
// created again retires what its predecessor made, watches of one application on two clusters
// never retire each other's secrets, and a watch that stops moving an AKS cluster never retires
// the secret that cluster runs on. 64 bits of the hash: finding a watch name whose prefix is
// another's is out of reach.
func SecretPrefix(clusterID, namespace, name, aksCluster string) string {
	sum := sha256.Sum256([]byte(clusterID + "\x00" + namespace + "\x00" + name + "\x00" + strings.ToLower(aksCluster)))
	return CredwatchPrefix + hex.EncodeToString(sum[:8]) + "-"
}

// WatchPrefix is the prefix SecretPrefix replaced, from the watch's UID: secrets named with it are
// still the watch's.
func WatchPrefix(watchUID string) string {
	uid := strings.ReplaceAll(watchUID, "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return CredwatchPrefix + uid + "-"
}

// CredwatchPrefix starts the display name of every secret credwatch creates.
const CredwatchPrefix = "credwatch-"

// Retirable lists the application secrets that may go once newKeyID is in use: under
// CreatedByCredwatch only those whose name starts with one of prefixes (the watch's own), never
// the new one, and never one that outlives it.
func Retirable(creds []v1alpha1.Credential, prefixes []string, newKeyID string, newEnd time.Time, p v1alpha1.RemoveOldPolicy) []v1alpha1.Credential {
	if p == v1alpha1.RemoveOldNever {
		return nil
	}
	var out []v1alpha1.Credential
	for _, c := range creds {
		if c.Source != v1alpha1.SourceApplication || c.Type != v1alpha1.CredentialTypePassword || c.KeyID == newKeyID {
			continue
		}
		ours := slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(c.DisplayName, p) })
		if !ours || c.EndTime.After(newEnd) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// Rotation step retries: waiting for a secret to replicate is quick (5s, 10s, ... 2m); a cluster
// that failed to take it is retried as cert-manager retries issuance, 1h, 2h, ... 24h, because
// each attempt restarts nodes.
const (
	propagationBase = 5 * time.Second
	propagationCap  = 2 * time.Minute
	clusterBase     = time.Hour
	clusterCap      = 24 * time.Hour
)

// PropagationBackoff is the wait before asking again whether a new secret is accepted.
func PropagationBackoff(failures int32) time.Duration {
	return Doubling(propagationBase, propagationCap, failures)
}

// ClusterBackoff is the wait before trying again to move a cluster onto the new secret.
func ClusterBackoff(failures int32) time.Duration { return Doubling(clusterBase, clusterCap, failures) }

var weekdays = map[v1alpha1.Weekday]time.Weekday{
	"Sunday": time.Sunday, "Monday": time.Monday, "Tuesday": time.Tuesday, "Wednesday": time.Wednesday,
	"Thursday": time.Thursday, "Friday": time.Friday, "Saturday": time.Saturday,
}

// WeekdayOf is d as Go names it, and false for a day the API does not name.
func WeekdayOf(d v1alpha1.Weekday) (time.Weekday, bool) {
	day, ok := weekdays[d]
	return day, ok
}

// InWindow reports whether now falls in the maintenance window, and otherwise when it next
// opens. A nil window is always open.
func InWindow(w *v1alpha1.MaintenanceWindow, now time.Time) (bool, time.Time, error) {
	if w == nil {
		return true, now, nil
	}
	loc := time.UTC
	if w.TimeZone != "" {
		var err error
		if loc, err = time.LoadLocation(w.TimeZone); err != nil {
			return false, time.Time{}, fmt.Errorf("maintenanceWindow.timeZone %q: %w", w.TimeZone, err)
		}
	}
	hh, mm, ok := strings.Cut(w.Start, ":")
	h, errH := strconv.Atoi(hh)
	m, errM := strconv.Atoi(mm)
	if !ok || errH != nil || errM != nil {
		return false, time.Time{}, fmt.Errorf("maintenanceWindow.start %q: want HH:MM", w.Start)
	}
	length, err := w.Duration.Parse()
	if err != nil {
		return false, time.Time{}, fmt.Errorf("maintenanceWindow.duration: %w", err)
	}
	days := map[time.Weekday]bool{}
	for _, d := range w.Days {
		days[weekdays[d]] = true
	}
	local := now.In(loc)
	var next time.Time
	// Yesterday's window may still be open; a week ahead always holds the next opening.
	for off := -1; off <= 7; off++ {
		open := time.Date(local.Year(), local.Month(), local.Day()+off, h, m, 0, 0, loc)
		if len(days) > 0 && !days[open.Weekday()] {
			continue
		}
		if !now.Before(open) && now.Before(open.Add(length)) {
			return true, now, nil
		}
		if open.After(now) {
			next = Earliest(next, open)
		}
	}
	return false, next, nil
}

// Marks of a Secret a rotation writes: the label every Secret credwatch creates carries, and the
// annotation naming the watch whose rotations write it.
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	ManagedByCredwatch  = "credwatch"
	AnnotationWatch     = "credwatch.dev/watch"
	AnnotationSecretOld = "credwatch.dev/secret-name"
)

// SecretOwned reports whether a rotation of the watch watchName (UID watchUID) may write a Secret
// with these labels and annotations: one credwatch created for this watch, or one an earlier
// version created for it (marked managed-by credwatch, and holding a secret whose name carries
// the watch's prefix), which is adopted. Any other Secret belongs to someone else, and writing it
// would let a namespace user overwrite a Secret by naming it.
func SecretOwned(labels, annotations map[string]string, watchName, watchUID string) bool {
	if labels[LabelManagedBy] != ManagedByCredwatch {
		return false
	}
	if w, ok := annotations[AnnotationWatch]; ok {
		return w == watchName
	}
	return strings.HasPrefix(annotations[AnnotationSecretOld], WatchPrefix(watchUID))
}
