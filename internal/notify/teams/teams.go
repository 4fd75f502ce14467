package teams

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/httppost"
)

var _ notify.Channel = (*Channel)(nil)

// Channel posts alerts to one Teams Workflows webhook.
type Channel struct {
	url    string
	client *http.Client
}

// New returns a channel posting to webhookURL, the URL the Workflows trigger shows; its sig
// parameter is the credential. A nil client means one with a 15 s timeout.
func New(webhookURL string, client *http.Client) (*Channel, error) {
	if err := httppost.ValidateURL(webhookURL); err != nil {
		return nil, fmt.Errorf("teams: %w", err)
	}
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	return &Channel{url: webhookURL, client: client}, nil
}

// Name implements notify.Channel.
func (c *Channel) Name() string { return notify.ChannelTeams }

// Send implements notify.Channel. Workflows answers 202 once it has queued the run; whether the
// flow then posts is not reported back, so 2xx is all there is to check.
func (c *Channel) Send(ctx context.Context, a notify.Alert) error {
	body, err := json.Marshal(render(a))
	if err != nil {
		return &notify.DeliveryError{Permanent: true, Err: fmt.Errorf("encoding the Teams card: %w", err)}
	}
	return httppost.PostJSON(ctx, c.client, c.url, body, nil)
}
