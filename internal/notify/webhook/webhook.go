package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/httppost"
)

var _ notify.Channel = (*Channel)(nil)

// Channel POSTs alerts as Payload to one URL.
type Channel struct {
	url    string
	key    []byte
	client *http.Client
	// now stamps deliveries; a retried delivery gets a fresh timestamp, so a receiver's replay
	// window counts from sending, not from when the alert was raised.
	now func() time.Time
}

// MinSigningKey is the shortest signing key New accepts, in bytes: HMAC-SHA256's output, below
// which a key is easier to guess than the signature it makes (RFC 2104).
const MinSigningKey = 32

// New returns a channel posting to url, signing with signingKey when it is not empty. A nil client
// means one with a 15 s timeout.
func New(url string, signingKey []byte, client *http.Client) (*Channel, error) {
	if err := httppost.ValidateURL(url); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	if len(signingKey) > 0 && len(signingKey) < MinSigningKey {
		return nil, fmt.Errorf("webhook: the signing key is shorter than %d bytes: make one with `openssl rand -hex 32`", MinSigningKey)
	}
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	return &Channel{url: url, key: signingKey, client: client, now: time.Now}, nil
}

// Name implements notify.Channel.
func (c *Channel) Name() string { return notify.ChannelWebhook }

// Send implements notify.Channel.
func (c *Channel) Send(ctx context.Context, a notify.Alert) error {
	body, err := json.Marshal(NewPayload(a))
	if err != nil {
		return &notify.DeliveryError{Permanent: true, Err: fmt.Errorf("encoding the webhook payload: %w", err)}
	}
	h := http.Header{}
	h.Set(HeaderDelivery, a.ID)
	if len(c.key) > 0 {
		ts := strconv.FormatInt(c.now().Unix(), 10)
		h.Set(HeaderTimestamp, ts)
		h.Set(HeaderSignature, sign(c.key, ts, body))
	}
	return httppost.PostJSON(ctx, c.client, c.url, body, h)
}
