package tenantscan

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/notify/compose"
	"github.com/credwatch/credwatch/internal/target"
)

// OwnSecrets tells the secrets credwatch's rotations created by their names; the rotation
// pacing records know them (pacing.Store).
type OwnSecrets interface {
	OwnSecret(ctx context.Context, tenantID, appID, displayName string) (bool, error)
}

// maxRecentlyAdded bounds status.tenantScan.recentlyAdded.
const maxRecentlyAdded = 50

// EventCredentialAdded tells of credentials a scan found that the scan before did not.
const EventCredentialAdded = "CredentialAdded"

// markAdded counts in counts, and tells of, the credentials of found that before, the scan
// before, did not hold, unless a rotation of credwatch's created them; none when there was no
// scan before (scanned false): a scan remembers the one before in memory only, and the first
// after a restart counts nothing. Added hears of every scan, of none as well, so that the
// tenant's count starts at zero.
func (s Scan) markAdded(ctx context.Context, obj *v1alpha1.CredentialWatch, before []v1alpha1.Credential, scanned bool, found Found, counts *v1alpha1.TenantScanStatus, now time.Time) {
	// A credential is known by its application, object, type and keyId: a certificate's keyId is
	// its adder's to choose, and one reused elsewhere is another credential.
	key := func(c v1alpha1.Credential) string {
		return strings.ToLower(c.AppID) + "/" + string(c.Source) + "/" + string(c.Type) + "/" + strings.ToLower(c.KeyID)
	}
	known := make(map[string]bool, len(before))
	for _, c := range before {
		known[key(c)] = true
	}
	var added []v1alpha1.Credential
	for _, c := range found.Credentials {
		if !scanned || known[key(c)] {
			continue
		}
		// Rotations add application secrets only.
		if c.Type == v1alpha1.CredentialTypePassword && c.Source == v1alpha1.SourceApplication && s.Own != nil {
			// A failed look-up counts it: a false alarm costs less than a missed intrusion.
			if own, err := s.Own.OwnSecret(ctx, obj.Spec.Target.TenantID(), c.AppID, c.DisplayName); err == nil && own {
				continue
			}
		}
		at := metav1.NewTime(now)
		c.AddedTime, c.State = &at, v1alpha1.StateValid
		if !c.EndTime.After(now) {
			c.State = v1alpha1.StateExpired
		}
		added = append(added, c)
	}
	if s.Added != nil {
		s.Added(obj.Spec.Target.TenantID(), len(added))
	}
	if len(added) == 0 {
		return
	}
	counts.Added += int32(len(added))
	counts.RecentlyAdded = append(counts.RecentlyAdded, added...)
	if n := len(counts.RecentlyAdded); n > maxRecentlyAdded {
		counts.RecentlyAdded = counts.RecentlyAdded[n-maxRecentlyAdded:]
	}
	for i, c := range added {
		if i == target.MaxStateEvents {
			s.Events.Eventf(obj, corev1.EventTypeWarning, EventCredentialAdded, "%d more credentials were added; status.tenantScan.recentlyAdded lists the last %d",
				len(added)-i, maxRecentlyAdded)
			continue
		}
		if i < target.MaxStateEvents {
			s.Events.Event(obj, corev1.EventTypeWarning, EventCredentialAdded, addedMessage(c))
		}
	}
}

// addedMessage tells of c, found added by a scan.
func addedMessage(c v1alpha1.Credential) string {
	what := "Certificate"
	if c.Type == v1alpha1.CredentialTypePassword {
		what = "Secret"
	}
	return fmt.Sprintf("%s %q (keyId %s, on the %s object) appeared on %q (appId %s) since the last scan, added by something other than credwatch's rotations; "+
		"it ends %s. If nobody here added it, see who did in the directory audit log, and remove it with: %s",
		what, c.DisplayName, c.KeyID, c.Source, c.AppDisplayName, c.AppID, c.EndTime.UTC().Format(time.RFC3339), compose.DeleteCommand(c.AppID, c))
}
