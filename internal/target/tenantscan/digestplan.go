package tenantscan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// Schedule is when a tenant scan's owner digests go out, parsed.
type Schedule struct {
	// Daily sends every day; otherwise once a week, on Weekday.
	Daily        bool
	Weekday      time.Weekday
	Hour, Minute int
	Location     *time.Location
}

var clockTime = regexp.MustCompile(`^([01][0-9]|2[0-3]):([0-5][0-9])$`)

// ScheduleOf parses a schedule: absent fields are Mondays at 09:00 UTC.
func ScheduleOf(s v1alpha1.DigestSchedule) (Schedule, error) {
	out := Schedule{Daily: s.Every == v1alpha1.EveryDay, Weekday: time.Monday, Hour: 9, Location: time.UTC}
	if s.Weekday != "" {
		day, ok := policy.WeekdayOf(s.Weekday)
		if !ok {
			return Schedule{}, fmt.Errorf("schedule.weekday %q: want Monday to Sunday", s.Weekday)
		}
		out.Weekday = day
	}
	if s.Time != "" {
		m := clockTime.FindStringSubmatch(s.Time)
		if m == nil {
			return Schedule{}, fmt.Errorf("schedule.time %q: want HH:MM, such as 09:00", s.Time)
		}
		out.Hour, _ = strconv.Atoi(m[1])
		out.Minute, _ = strconv.Atoi(m[2])
	}
	if s.TimeZone != "" {
		loc, err := time.LoadLocation(s.TimeZone)
		if err != nil {
			return Schedule{}, fmt.Errorf("schedule.timeZone %q is not an IANA time zone such as Europe/Berlin or America/New_York", s.TimeZone)
		}
		out.Location = loc
	}
	return out, nil
}

// PeriodOf is the period now falls in: from the last scheduled moment at or before now to the
// next. Days are counted on the calendar of the schedule's time zone, so a period across a change
// of daylight saving time is an hour longer or shorter, and the digests keep their hour.
func PeriodOf(s Schedule, now time.Time) (start, next time.Time) {
	local := now.In(s.Location)
	start = time.Date(local.Year(), local.Month(), local.Day(), s.Hour, s.Minute, 0, 0, s.Location)
	days := 1
	if !s.Daily {
		days = 7
		start = start.AddDate(0, 0, -int((7+local.Weekday()-s.Weekday)%7))
	}
	if start.After(now) {
		start = start.AddDate(0, 0, -days)
	}
	return start, start.AddDate(0, 0, days)
}

// DigestApp is one application as its owners' digests list it.
type DigestApp struct {
	AppID, ObjectID, DisplayName string
	// Credentials need attention, with State set, soonest end first.
	Credentials []v1alpha1.Credential
	// Findings break the hygiene policy.
	Findings []policy.Finding
}

// DigestInputs are what a period's digests are made of.
type DigestInputs struct {
	// All are the tenant scan's credentials; SAML and OptedOut its appIds of each kind.
	All            []v1alpha1.Credential
	SAML, OptedOut map[string]bool
	Thresholds     policy.Thresholds
	Hygiene        policy.Hygiene
	// Within is how close to the period's Start a credential's end is for it to be listed, and
	// Since the start of the last period, after which an expired credential is still news: the
	// period's digests list what its start called for, however late they go. States are as of Now.
	Within            time.Duration
	Since, Start, Now time.Time
}

// DigestApps are the applications with something to tell their owners, by appId: credentials
// ending within in.Within of the period's start or expired since in.Since (renewed ones left
// out: nothing needs doing), and hygiene findings. Applications opted out are left out.
func DigestApps(in DigestInputs) []DigestApp {
	apps := map[string]*DigestApp{}
	get := func(c v1alpha1.Credential) *DigestApp {
		a := apps[c.AppID]
		if a == nil {
			a = &DigestApp{AppID: c.AppID}
			apps[c.AppID] = a
		}
		if c.AppObjectID != "" {
			a.ObjectID = c.AppObjectID
		}
		if a.DisplayName == "" || c.Source == v1alpha1.SourceApplication {
			a.DisplayName = c.AppDisplayName
		}
		return a
	}
	renewed := policy.Renewed(in.All)
	for i, c := range in.All {
		if renewed[i] || in.OptedOut[c.AppID] {
			continue
		}
		end := c.EndTime.Time
		if end.After(in.Since) && !end.After(in.Start.Add(in.Within)) {
			c.State = policy.StateAt(end, in.Now, in.Thresholds)
			a := get(c)
			a.Credentials = append(a.Credentials, c)
		}
	}
	saml := func(appID string) bool { return in.SAML[appID] }
	for _, f := range policy.FindingsOf(in.All, saml, in.Start, in.Hygiene, math.MaxInt).Listed {
		if in.OptedOut[f.Credential.AppID] {
			continue
		}
		a := get(f.Credential)
		a.Findings = append(a.Findings, f)
	}
	out := make([]DigestApp, 0, len(apps))
	for _, a := range apps {
		slices.SortStableFunc(a.Credentials, policy.BySoonestEnd)
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b DigestApp) int { return strings.Compare(a.AppID, b.AppID) })
	return out
}

// Fallback is the recipient of what reaches no owner: applications without an owner with a
// mailbox, or registered in another tenant.
const Fallback = ""

// OwnerMails says where an application's digest lines go, by its object ID: the mail addresses
// of its owners, and whether they are known yet.
type OwnerMails func(objectID string) (mails []string, known bool)

// DigestRecipients gives each recipient (an owner's address in lower case, or Fallback) the
// indexes of the apps its digest lists, and the object IDs whose owners must be read first.
func DigestRecipients(apps []DigestApp, owners OwnerMails) (map[string][]int, []string) {
	out := map[string][]int{}
	var unread []string
	for i, a := range apps {
		if a.ObjectID == "" {
			out[Fallback] = append(out[Fallback], i)
			continue
		}
		mails, known := owners(a.ObjectID)
		if !known {
			unread = append(unread, a.ObjectID)
			continue
		}
		if len(mails) == 0 {
			out[Fallback] = append(out[Fallback], i)
		}
		seen := map[string]bool{}
		for _, m := range mails {
			if k := strings.ToLower(strings.TrimSpace(m)); k != "" && !seen[k] {
				seen[k] = true
				out[k] = append(out[k], i)
			}
		}
	}
	return out, unread
}

// ExpiredBetween lists the credentials of all, renewed ones left out, that ended in (since, now]:
// their owners hear of each at once rather than in the next digest. Applications opted out are
// left out.
func ExpiredBetween(all []v1alpha1.Credential, optedOut map[string]bool, since, now time.Time) []v1alpha1.Credential {
	renewed := policy.Renewed(all)
	var out []v1alpha1.Credential
	for i, c := range all {
		if end := c.EndTime.Time; !renewed[i] && !optedOut[c.AppID] && end.After(since) && !end.After(now) {
			c.State = v1alpha1.StateExpired
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, policy.BySoonestEnd)
	return out
}

// The keys of a tenant scan's digest ledger: a ConfigMap's keys take letters, digits, '-', '_'
// and '.', so an address is hashed.
const (
	digestKeyPrefix  = "d."
	expiredKeyPrefix = "x."
	overrunKeyPrefix = "o."
)

func periodLabel(start time.Time) string { return start.UTC().Format("20060102T1504") }

// DigestKey is the ledger's key of recipient's digest of the period starting at start.
func DigestKey(start time.Time, recipient string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(recipient)))
	return DigestKeyPrefix(start) + hex.EncodeToString(sum[:12])
}

// DigestKeyPrefix begins the ledger's keys of the digests of the period starting at start.
func DigestKeyPrefix(start time.Time) string { return digestKeyPrefix + periodLabel(start) + "." }

// ExpiredKey is the ledger's key of the message to recipient that c expired: one each, since
// each recipient's message goes, or fails, on its own.
func ExpiredKey(c v1alpha1.Credential, recipient string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(recipient)))
	return ExpiredKeyPrefix(c) + hex.EncodeToString(sum[:8])
}

// ExpiredKeyPrefix begins the ledger's keys of the messages that c expired.
func ExpiredKeyPrefix(c v1alpha1.Credential) string {
	sum := sha256.Sum256([]byte(string(c.Source) + "/" + c.KeyID))
	return expiredKeyPrefix + hex.EncodeToString(sum[:8]) + "."
}

// OverrunKey is the ledger's key of the alert that the period starting at start ended before
// its digests all went.
func OverrunKey(start time.Time) string { return overrunKeyPrefix + periodLabel(start) }

// DigestGap is the least time between two digests to one address of one tenant, whatever the
// schedule, the watch or a restart: a daily schedule keeps it, one edited to come sooner does not.
const DigestGap = 20 * time.Hour

// Stale lists the ledger's keys that no longer matter at now, in the period starting at start:
// digests of other periods sent more than DigestGap ago (those sent since hold the next back),
// overruns of periods before the last, and expiry messages of credentials not in expired (those
// that ended this period). get reads an entry.
func Stale(keys []string, get func(string) (string, bool), start, last, now time.Time, expired []v1alpha1.Credential) []string {
	keep := map[string]bool{OverrunKey(last): true, OverrunKey(start): true}
	for _, c := range expired {
		keep[ExpiredKeyPrefix(c)] = true
	}
	current := DigestKeyPrefix(start)
	recent := func(k string) bool {
		v, _ := get(k)
		d := DeliveryOf(v)
		return d.Sent && now.Before(d.At.Add(DigestGap))
	}
	var out []string
	for _, k := range keys {
		credential := ""
		if strings.HasPrefix(k, expiredKeyPrefix) {
			if i := strings.LastIndexByte(k, '.'); i > 0 {
				credential = k[:i+1]
			}
		}
		switch {
		case keep[k], keep[credential], strings.HasPrefix(k, current):
		case strings.HasPrefix(k, digestKeyPrefix) && recent(k):
		case strings.HasPrefix(k, digestKeyPrefix), strings.HasPrefix(k, expiredKeyPrefix), strings.HasPrefix(k, overrunKeyPrefix):
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// LastDigests is when each recipient, by its key's hash, last had a digest, from the ledger's
// digest entries of any period.
func LastDigests(entries func(func(key, value string))) map[string]time.Time {
	out := map[string]time.Time{}
	entries(func(k, v string) {
		if !strings.HasPrefix(k, digestKeyPrefix) {
			return
		}
		d := DeliveryOf(v)
		hash := k[strings.LastIndexByte(k, '.')+1:]
		if d.Sent && d.At.After(out[hash]) {
			out[hash] = d.At
		}
	})
	return out
}

// RecipientHash is the part of a digest's key that names its recipient.
func RecipientHash(recipient string) string {
	k := DigestKey(time.Time{}, recipient)
	return k[strings.LastIndexByte(k, '.')+1:]
}

// Delivery is a ledger entry's word on a message: sent (or claimed for sending), or failed
// Failures times and next tried at Next.
type Delivery struct {
	Sent bool
	// At is when a message was claimed for sending; zero when the entry does not say.
	At       time.Time
	Failures int32
	Next     time.Time
}

// String is the entry as the ledger keeps it.
func (d Delivery) String() string {
	if d.Sent {
		if d.At.IsZero() {
			return "sent"
		}
		return fmt.Sprintf("sent %d", d.At.Unix())
	}
	return fmt.Sprintf("failed %d %d", d.Failures, d.Next.Unix())
}

// DeliveryOf reads an entry; one it cannot read counts as sent, so nothing goes twice.
func DeliveryOf(entry string) Delivery {
	var n int32
	var at int64
	if _, err := fmt.Sscanf(entry, "failed %d %d", &n, &at); err == nil {
		return Delivery{Failures: n, Next: time.Unix(at, 0).UTC()}
	}
	if _, err := fmt.Sscanf(entry, "sent %d", &at); err == nil {
		return Delivery{Sent: true, At: time.Unix(at, 0).UTC()}
	}
	return Delivery{Sent: true}
}

// Failed is the entry of a message that failed once more at now.
func (d Delivery) Failed(now time.Time, retryAfter time.Duration) Delivery {
	n := d.Failures + 1
	return Delivery{Failures: n, Next: now.Add(policy.DeliveryBackoff(n, retryAfter))}
}
