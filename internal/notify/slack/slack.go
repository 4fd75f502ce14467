package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/credwatch/credwatch/internal/notify"
	"github.com/credwatch/credwatch/internal/notify/httppost"
)

var _ notify.Channel = (*Channel)(nil)

// Options configure a Channel: either Token and Channel, or WebhookURL.
type Options struct {
	// Token is a bot token with chat:write; Channel is the channel ID (C0123...) or name to post to.
	Token, Channel string
	// WebhookURL is an incoming webhook; it posts to the channel it was created for.
	WebhookURL string
	// APIURL replaces https://slack.com/api/ for tests and Slack GovSlack; token mode only.
	APIURL string
	// HTTPClient is used for every request; nil means one with a 15 s timeout.
	HTTPClient *http.Client
}

// Channel posts alerts to one Slack channel.
type Channel struct {
	api        *slack.Client // nil in webhook mode
	channel    string
	webhookURL string
	client     *http.Client // webhook mode; api has its own
	// secrets are scrubbed from every error: the token, the webhook URL.
	secrets []string
}

// New returns a channel for o, or an error saying which options are missing or clash. The error
// never quotes the token or the webhook URL.
func New(o Options) (*Channel, error) {
	client := o.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	switch {
	case o.WebhookURL != "" && (o.Token != "" || o.Channel != ""):
		return nil, errors.New("slack: set either a token and a channel, or a webhook URL, not both: a webhook posts only to the channel it was created for")
	case o.WebhookURL != "":
		if o.APIURL != "" {
			return nil, errors.New("slack: an API URL applies to token mode only, not to a webhook URL")
		}
		if err := httppost.ValidateURL(o.WebhookURL); err != nil {
			return nil, fmt.Errorf("slack: webhook URL: %w", err)
		}
		return &Channel{webhookURL: o.WebhookURL, client: client, secrets: httppost.URLSecrets(o.WebhookURL)}, nil
	case o.Token != "" && o.Channel == "":
		return nil, errors.New("slack: a token needs a channel to post to")
	case o.Token == "" && o.Channel != "":
		return nil, errors.New("slack: a channel needs a bot token to post with (or use a webhook URL instead)")
	case o.Token == "":
		return nil, errors.New("slack: set a bot token and a channel, or a webhook URL")
	}
	opts := []slack.Option{slack.OptionHTTPClient(client)}
	if o.APIURL != "" {
		// slack-go appends the method name to the URL as it is.
		opts = append(opts, slack.OptionAPIURL(strings.TrimSuffix(o.APIURL, "/")+"/"))
	}
	return &Channel{api: slack.New(o.Token, opts...), channel: o.Channel, secrets: []string{o.Token}}, nil
}

// Name implements notify.Channel.
func (c *Channel) Name() string { return notify.ChannelSlack }

// Send implements notify.Channel.
func (c *Channel) Send(ctx context.Context, a notify.Alert) error {
	msg := message(a)
	if c.api == nil {
		if err := slack.PostWebhookCustomHTTPContext(ctx, c.webhookURL, c.client, msg); err != nil {
			return c.deliveryError("posting to the Slack webhook", err)
		}
		return nil
	}
	_, _, err := c.api.PostMessageContext(ctx, c.channel,
		slack.MsgOptionBlocks(msg.Blocks.BlockSet...),
		slack.MsgOptionText(msg.Text, false), // message() escaped it already
	)
	if err != nil {
		return c.deliveryError("posting to Slack channel "+c.channel, err)
	}
	return nil
}

// deliveryError classifies what slack-go returned: a rate limit says how long to wait, an HTTP
// status or a Slack error code says whether trying again can help.
func (c *Channel) deliveryError(doing string, err error) error {
	if refused := notify.Refused(err); refused != nil {
		return refused
	}
	de := &notify.DeliveryError{}
	var (
		limited *slack.RateLimitedError
		status  slack.StatusCodeError
		api     slack.SlackErrorResponse
	)
	switch {
	case errors.As(err, &limited):
		de.RetryAfter = limited.RetryAfter
	case errors.As(err, &status):
		de.Permanent = httppost.PermanentStatus(status.Code)
		if hint := webhookHints[status.Code]; hint != "" && c.api == nil {
			err = fmt.Errorf("%w (%s)", err, hint)
		}
	case errors.As(err, &api):
		de.Permanent = !transientCodes[api.Err]
		if hint := hints[api.Err]; hint != "" {
			err = fmt.Errorf("%w (%s)", err, hint)
		}
	}
	de.Err = notify.Redact(fmt.Errorf("%s: %w", doing, err), c.secrets...)
	return de
}

// transientCodes are the Slack API error codes that go away by themselves. Every other code names
// a problem with the token, the channel or the message, which sending again does not fix.
var transientCodes = map[string]bool{
	"ratelimited":         true,
	"rate_limited":        true,
	"internal_error":      true,
	"fatal_error":         true,
	"service_unavailable": true,
	"request_timeout":     true,
	"team_added_to_org":   true,
}

// hints say what to do about the codes a misconfigured channel gets.
var hints = map[string]string{
	"invalid_auth":      "Slack rejected the token: check the Secret holding it",
	"not_authed":        "no token reached Slack: check the Secret holding it",
	"token_revoked":     "the token was revoked: install the app again and update the Secret",
	"token_expired":     "the token expired: update the Secret",
	"account_inactive":  "the token's user or app was deactivated",
	"missing_scope":     "the token lacks the chat:write scope",
	"channel_not_found": "no such channel, or the app cannot see it: give the channel ID, invite the app",
	"not_in_channel":    "the app is not a member of the channel: invite it with /invite",
	"is_archived":       "the channel is archived",
}

// webhookHints stand in for the error code an incoming webhook puts in its body, which slack-go
// drops: each status has only a few codes behind it.
var webhookHints = map[int]string{
	http.StatusBadRequest: "Slack rejected the message",
	http.StatusForbidden:  "posting through this webhook is prohibited, or its token is invalid",
	http.StatusNotFound:   "the webhook was removed or its channel deleted: create a new one",
	http.StatusGone:       "the channel is archived",
}
