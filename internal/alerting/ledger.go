package alerting

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/credwatch/credwatch/api/v1alpha1"
	"github.com/credwatch/credwatch/internal/policy"
)

// The ledger is the alerts part of a watch's status: what each channel was last sent about each
// subject, and which channels are failing. These functions are its only writers.

// Forget drops what channel was sent about subject.
func Forget(l *v1alpha1.AlertsStatus, channel, subject string) {
	kept := l.Sent[:0]
	for _, s := range l.Sent {
		if s.Channel != channel || s.Subject != subject {
			kept = append(kept, s)
		}
	}
	l.Sent = kept
}

// RecordDelivery notes that p reaches its channel at now. It is written before the send, as a
// claim; Restore takes it back if the send fails.
func RecordDelivery(l *v1alpha1.AlertsStatus, p Planned, now time.Time) {
	Forget(l, p.Channel, p.Subject)
	if p.Forget {
		return
	}
	l.Sent = append(l.Sent, v1alpha1.SentAlert{
		Channel: p.Channel, Subject: p.Subject, Step: p.Step.Name,
		DueTime: metav1.NewTime(p.Step.Due), SentTime: metav1.NewTime(now),
	})
}

// Failure is channel's failure record, nil when its last delivery worked.
func Failure(l *v1alpha1.AlertsStatus, channel string) *v1alpha1.ChannelFailure {
	for i := range l.Failing {
		if l.Failing[i].Channel == channel {
			return &l.Failing[i]
		}
	}
	return nil
}

// RecordFailure notes a failed delivery on channel, with the AlertsDelivered reason it gives, and
// schedules the next attempt. A permanent failure (a revoked token, an unknown channel, a refused
// destination) is tried again only after the longest backoff: nothing changes until someone
// fixes the configuration.
func RecordFailure(l *v1alpha1.AlertsStatus, channel, reason, message string, permanent bool, retryAfter time.Duration, now time.Time) v1alpha1.ChannelFailure {
	f := Failure(l, channel)
	if f == nil {
		l.Failing = append(l.Failing, v1alpha1.ChannelFailure{Channel: channel})
		f = &l.Failing[len(l.Failing)-1]
	}
	f.Failures++
	f.Reason, f.Message = reason, message
	wait := policy.DeliveryBackoff(f.Failures, retryAfter)
	if permanent {
		wait = max(wait, policy.DeliveryCap)
	}
	f.NextAttemptTime = metav1.NewTime(now.Add(wait))
	return *f
}

// Sent is what channel was last sent about subject, nil if nothing.
func Sent(l *v1alpha1.AlertsStatus, channel, subject string) *v1alpha1.SentAlert {
	for i := range l.Sent {
		if l.Sent[i].Channel == channel && l.Sent[i].Subject == subject {
			return &l.Sent[i]
		}
	}
	return nil
}

// Restore puts back what channel was last sent about subject before a claim that came to nothing.
func Restore(l *v1alpha1.AlertsStatus, channel, subject string, previous *v1alpha1.SentAlert) {
	Forget(l, channel, subject)
	if previous != nil {
		l.Sent = append(l.Sent, *previous)
	}
}

// KeepChannels drops failure records of channels no longer configured.
func KeepChannels(l *v1alpha1.AlertsStatus, configured []string) {
	kept := l.Failing[:0]
	for _, f := range l.Failing {
		for _, c := range configured {
			if f.Channel == c {
				kept = append(kept, f)
				break
			}
		}
	}
	l.Failing = kept
}

// ClearFailure notes that channel delivers again.
func ClearFailure(l *v1alpha1.AlertsStatus, channel string) {
	kept := l.Failing[:0]
	for _, f := range l.Failing {
		if f.Channel != channel {
			kept = append(kept, f)
		}
	}
	l.Failing = kept
}
