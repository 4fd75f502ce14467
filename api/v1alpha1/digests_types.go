package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OwnerDigests mails each application's owners, once a period, one message listing every
// credential of theirs that needs attention and every hygiene finding, rather than telling a
// channel of every credential of the tenant.
type OwnerDigests struct {
	// Email is the relay and sender, and the fallback.
	// +required
	Email DigestEmail `json:"email"`

	// Schedule is when each period's digests go out. Absent, Mondays at 09:00 UTC.
	// +optional
	Schedule DigestSchedule `json:"schedule,omitempty"`

	// Within is how close to its end a credential is put in a digest; one that expired since the
	// last digest is too. Absent, the watch's thresholds.warning.
	// +optional
	Within Duration `json:"within,omitempty"`

	// OptOutTag is an application tag that keeps the application out of every digest and
	// expiry message, such as credwatch-no-digest.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9._=+-]+$')",message="optOutTag must be one word of letters, digits and . _ = + -, such as credwatch-no-digest: it is quoted in every digest"
	// +optional
	OptOutTag string `json:"optOutTag,omitempty"`
}

// DigestEmail is how owner digests are mailed.
type DigestEmail struct {
	// SMTP is the server that relays the mail, as for alerts.email.smtp.
	SMTP SMTPServer `json:"smtp"`

	// Fallback lists where the lines go of applications with no owner that has a mailbox (none
	// at all, only service principals or users without mail, or registered in another tenant),
	// and the alert when a period's digests could not all go out before the next began. Empty,
	// those lines go nowhere, and status says how many.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=254
	// +kubebuilder:validation:XValidation:rule="self.all(a, a.matches('^[^@\\\\s]+@[^@\\\\s]+$'))",message="fallback must list mail addresses, such as platform@example.com"
	// +optional
	Fallback []string `json:"fallback,omitempty"`
}

// DigestEvery is how often digests go out.
// +kubebuilder:validation:Enum=Day;Week
type DigestEvery string

// The schedules digests keep.
const (
	EveryDay  DigestEvery = "Day"
	EveryWeek DigestEvery = "Week"
)

// DigestSchedule is a moment that comes back every day or every week.
// +kubebuilder:validation:XValidation:rule="!has(self.weekday) || !has(self.every) || self.every == 'Week'",message="schedule.weekday is for every: Week; a daily digest goes every day"
type DigestSchedule struct {
	// Every is Day or Week (the default).
	// +optional
	Every DigestEvery `json:"every,omitempty"`

	// Weekday is the day of a weekly digest, Monday (the default) to Sunday.
	// +optional
	Weekday Weekday `json:"weekday,omitempty"`

	// Time is the time of day, HH:MM on a 24-hour clock; 09:00 when absent.
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="self.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$')",message="schedule.time must be HH:MM on a 24-hour clock, such as 09:00 or 17:30"
	// +optional
	Time string `json:"time,omitempty"`

	// TimeZone is the IANA time zone of Time, such as Europe/Berlin; UTC when absent.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$')",message="schedule.timeZone must be an IANA time zone name such as Europe/Berlin, America/New_York or UTC"
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// DigestsStatus is how the current period's owner digests stand.
type DigestsStatus struct {
	// Since is when the watch first had ownerDigests: a period that began before gets no digest,
	// and a credential that expired before, no message.
	Since metav1.Time `json:"since"`
	// Period is when the current period began: its digests went out, or go out, from then.
	Period metav1.Time `json:"period"`
	// Schedule is the schedule the periods follow, as people say it; when it changes, the period
	// under way gets no digest, as when the digests were first set up.
	Schedule string `json:"schedule"`
	// NextPeriod is when the next begins.
	NextPeriod metav1.Time `json:"nextPeriod"`
	// Recipients is how many owners (and the fallback) the period's digests go to; 0 until the
	// owners of every application in them are read.
	// +optional
	Recipients int32 `json:"recipients,omitempty"`
	// Sent is how many of them went out.
	// +optional
	Sent int32 `json:"sent,omitempty"`
	// Failing is how many failed and wait for their next attempt.
	// +optional
	Failing int32 `json:"failing,omitempty"`
	// OwnersUnread is how many applications' owners are still to be read this period.
	// +optional
	OwnersUnread int32 `json:"ownersUnread,omitempty"`
	// ExpiredNotices is how many credentials that expired this period their owners were told of.
	// +optional
	ExpiredNotices int32 `json:"expiredNotices,omitempty"`
	// Message says what holds the digests up, if anything.
	// +optional
	Message string `json:"message,omitempty"`
}
