// Package webhook delivers alerts as a versioned JSON document to any HTTP receiver (PagerDuty or
// Opsgenie bridges, chat-ops bots), signed with HMAC-SHA256 so the receiver can trust it. It also
// holds PostJSON, the one place where an HTTP answer becomes a retryable or permanent
// notify.DeliveryError, which the Teams channel shares.
package webhook
