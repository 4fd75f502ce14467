package policy

import (
	"sort"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
)

// MaxListed bounds how many credentials a tenant scan's status lists, so that a tenant of any
// size fits in one object: metrics carry every credential.
const MaxListed = 100

// ScanView is what a tenant scan amounts to at one instant.
type ScanView struct {
	// Summary covers every credential that was not renewed.
	Summary
	// Listed are the credentials that need attention, at most limit, nearest their expiry
	// (past or future) first, with State set: what expires tomorrow and what expired yesterday
	// come before what expired years ago.
	Listed []v1alpha1.Credential
	// Counts is how many credentials are in each state, renewed ones left out.
	Counts map[v1alpha1.CredentialState]int32
	// Renewed is how many were renewed by a newer credential of their kind on the same object.
	Renewed int32
	// Unlisted is how many needed attention but did not fit in Listed.
	Unlisted int32
	// Groups names each state's most telling credential, which Listed may leave out.
	Groups
}

// ViewScan evaluates every credential of a tenant scan at now. It leaves all unchanged: the scan
// is shared with the metrics, which read it while reconciles run.
func ViewScan(all []v1alpha1.Credential, now time.Time, t Thresholds, limit int) ScanView {
	v := ScanView{Summary: Summary{State: v1alpha1.StateValid}, Counts: map[v1alpha1.CredentialState]int32{}}
	renewed := Renewed(all)
	var attention []v1alpha1.Credential
	for i, c := range all {
		if renewed[i] {
			v.Renewed++
			continue
		}
		c.State = StateAt(c.EndTime.Time, now, t)
		v.Counts[c.State]++
		if c.State != v1alpha1.StateValid {
			attention = append(attention, c)
		}
		v.Groups.add(&c)
		v.Summary.add(&c, now, t)
	}
	v.finish(now)
	distance := func(c v1alpha1.Credential) time.Duration { return c.EndTime.Sub(now).Abs() }
	sort.SliceStable(attention, func(i, j int) bool {
		if di, dj := distance(attention[i]), distance(attention[j]); di != dj {
			return di < dj
		}
		return attention[i].KeyID < attention[j].KeyID
	})
	if len(attention) > limit {
		v.Unlisted = int32(len(attention) - limit)
		attention = attention[:limit]
	}
	v.Listed = attention
	return v
}

// Renewed marks the credentials another of the same application renews, as Newer finds them.
func Renewed(all []v1alpha1.Credential) map[int]bool {
	return renewedBy(all, Renews)
}

// Replaced appends to dst, in order, the indices of the credentials whose end no longer matters,
// because a newer one of the same application renews them and has started. Where only credwatch
// moves the consumers (rotationOnly: an AKS cluster moves only when reset, a rotating watch's
// Secret only when rotated), only a secret its rotations put in use counts (InUseByRotation,
// with the watch's last and current rotation): one added by hand leaves them on the old. dst is
// for a scrape to reuse across its watches, which this does without allocating.
func Replaced(dst []int, all []v1alpha1.Credential, last *v1alpha1.LastRotation, r *v1alpha1.RotationStatus, rotationOnly bool, now time.Time) []int {
	replaces := func(d, c v1alpha1.Credential) bool {
		return Renews(d, c) && !startOf(d).After(now) && (!rotationOnly || InUseByRotation(d.KeyID, last, r))
	}
	if len(all) > pairwiseUpTo {
		set := renewedBy(all, replaces)
		for i := range all {
			if set[i] {
				dst = append(dst, i)
			}
		}
		return dst
	}
	for i := range all {
		for j := range all {
			if all[j].AppID == all[i].AppID && replaces(all[j], all[i]) {
				dst = append(dst, i)
				break
			}
		}
	}
	return dst
}

// pairwiseUpTo is how many credentials Replaced compares pairwise: a watch's few, without the map
// a tenant scan's tens of thousands need to stay linear.
const pairwiseUpTo = 16

// renewedBy marks the credentials some other of the same application renews by renewed(d, c):
// grouping by application keeps a scan of tens of thousands of credentials linear.
func renewedBy(all []v1alpha1.Credential, renewed func(d, c v1alpha1.Credential) bool) map[int]bool {
	byApp := map[string][]int{}
	for i, c := range all {
		byApp[c.AppID] = append(byApp[c.AppID], i)
	}
	out := map[int]bool{}
	for _, idx := range byApp {
		for _, i := range idx {
			for _, j := range idx {
				if renewed(all[j], all[i]) {
					out[i] = true
					break
				}
			}
		}
	}
	return out
}

// WorsenedSince lists the credentials of a scan, renewed ones left out, whose state at now is
// worse than at since, with State set, nearest their expiry first: the ones worth an event.
// Comparing instants, not the lists status showed, keeps a credential that merely moves into
// the listed hundred from looking new.
func WorsenedSince(all []v1alpha1.Credential, since, now time.Time, t Thresholds) []v1alpha1.Credential {
	renewed := Renewed(all)
	var out []v1alpha1.Credential
	for i, c := range all {
		if renewed[i] {
			continue
		}
		c.State = StateAt(c.EndTime.Time, now, t)
		if Worse(c.State, StateAt(c.EndTime.Time, since, t)) {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].EndTime.Sub(now).Abs() < out[j].EndTime.Sub(now).Abs() })
	return out
}
