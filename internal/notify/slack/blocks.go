package slack

import (
	"strings"
	"unicode"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackutilsx"

	"github.com/credwatch/credwatch/internal/notify"
)

// Block Kit limits; Slack rejects the whole message (invalid_blocks) when one is exceeded.
const (
	maxHeader  = 150
	maxFields  = 10
	maxField   = 2000
	maxSection = 3000
)

// message renders a as what Slack receives: the blocks people read and the plain fallback text.
// It is the incoming-webhook body as it stands; chat.postMessage sends the same two parts.
func message(a notify.Alert) *slack.WebhookMessage {
	return &slack.WebhookMessage{
		Text:   esc(notify.Text(a)),
		Blocks: &slack.Blocks{BlockSet: blocks(a)},
	}
}

// blocks is the title as a header, the facts as fields (ten per section, Slack's limit), what to
// do, and a context line with the watch and the alert ID to quote when asking about it.
func blocks(a notify.Alert) []slack.Block {
	bs := []slack.Block{
		slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, truncate(emoji(a)+" "+a.Title(), maxHeader), true, false)),
	}
	lines := a.Lines()
	for len(lines) > 0 {
		n := min(len(lines), maxFields)
		fields := make([]*slack.TextBlockObject, n)
		for i, l := range lines[:n] {
			// Plain text: values come from Azure (display names are anyone's to set), and mrkdwn
			// has no escape for its formatting or its links.
			fields[i] = slack.NewTextBlockObject(slack.PlainTextType, truncate(l[0]+"\n"+l[1], maxField), false, false)
		}
		bs = append(bs, slack.NewSectionBlock(nil, fields, nil))
		lines = lines[n:]
	}
	if a.Fix != "" {
		fix := esc(a.Fix)
		if isCommand(a.Fix) {
			fix = "```" + fix + "```"
		}
		bs = append(bs, slack.NewSectionBlock(mrkdwn(truncate("*What to do*\n"+fix, maxSection)), nil, nil))
	}
	return append(bs, slack.NewContextBlock("",
		mrkdwn("CredentialWatch "+esc(a.Namespace+"/"+a.Name)),
		mrkdwn("Alert ID "+esc(a.ID)),
	))
}

// emoji marks the header so the alert's weight shows in a busy channel: good news is a check mark
// whatever its severity.
func emoji(a notify.Alert) string {
	if a.GoodNews() {
		return ":white_check_mark:"
	}
	switch a.Severity {
	case notify.SeverityCritical:
		return ":rotating_light:"
	case notify.SeverityWarning:
		return ":warning:"
	}
	return ":information_source:"
}

// isCommand tells an exact command from a sentence in Alert.Fix: a command starts with a lower-case
// program name and does not end like a sentence. A wrong guess only changes the formatting.
func isCommand(fix string) bool {
	first, _, _ := strings.Cut(fix, " ")
	return first != "" && strings.IndexFunc(first, unicode.IsUpper) < 0 &&
		!strings.HasSuffix(fix, ".") && !strings.Contains(fix, "\n")
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, s, false, false)
}

// esc escapes the three characters Slack reads as markup in every text field, code included.
func esc(s string) string { return slackutilsx.EscapeMessage(s) }

// truncate cuts s to at most n characters, ending in an ellipsis when it cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
