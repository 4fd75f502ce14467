package teams

import (
	"strings"

	"github.com/credwatch/credwatch/internal/notify"
)

// message is the envelope a Workflows webhook expects: a bot-framework message whose one
// attachment is the card the flow posts.
type message struct {
	Type        string       `json:"type"`
	Attachments []attachment `json:"attachments"`
}

type attachment struct {
	ContentType string `json:"contentType"`
	// ContentURL is always null: the card travels inline, but the flow's schema wants the key.
	ContentURL *string `json:"contentUrl"`
	Content    card    `json:"content"`
}

// card is an Adaptive Card 1.4, the newest version Teams renders on every client.
type card struct {
	Schema  string    `json:"$schema"`
	Type    string    `json:"type"`
	Version string    `json:"version"`
	Body    []element `json:"body"`
	MSTeams msteams   `json:"msteams"`
}

type msteams struct {
	// Width "Full" uses the channel's width, so the fact set and the command do not wrap early.
	Width string `json:"width"`
}

// element is the TextBlock or FactSet, the two element types the card uses.
type element struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Size     string `json:"size,omitempty"`
	Weight   string `json:"weight,omitempty"`
	Color    string `json:"color,omitempty"`
	Spacing  string `json:"spacing,omitempty"`
	IsSubtle bool   `json:"isSubtle,omitempty"`
	Wrap     bool   `json:"wrap,omitempty"`
	Facts    []fact `json:"facts,omitempty"`
}

type fact struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

// render builds the card for a: the title coloured by severity, the facts, what to do, and a
// footer naming the watch and the alert ID to quote when asking about it.
func render(a notify.Alert) message {
	facts := make([]fact, 0, len(a.Lines()))
	for _, l := range a.Lines() {
		facts = append(facts, fact{Title: l[0], Value: escapeMarkdown(l[1])})
	}
	body := []element{
		{Type: "TextBlock", Text: escapeMarkdown(a.Title()), Size: "Large", Weight: "Bolder", Color: color(a), Wrap: true},
		{Type: "FactSet", Facts: facts},
	}
	if a.Fix != "" {
		body = append(body,
			element{Type: "TextBlock", Text: "What to do", Weight: "Bolder", Spacing: "Medium", Wrap: true},
			element{Type: "TextBlock", Text: a.Fix, Wrap: true},
		)
	}
	body = append(body, element{
		Type: "TextBlock", Text: "CredentialWatch " + a.Namespace + "/" + a.Name + " · alert " + a.ID,
		Size: "Small", IsSubtle: true, Spacing: "Medium", Wrap: true,
	})
	return message{
		Type: "message",
		Attachments: []attachment{{
			ContentType: "application/vnd.microsoft.card.adaptive",
			Content: card{
				Schema:  "http://adaptivecards.io/schemas/adaptive-card.json",
				Type:    "AdaptiveCard",
				Version: "1.4",
				Body:    body,
				MSTeams: msteams{Width: "Full"},
			},
		}},
	}
}

// color maps an alert to an Adaptive Card text colour: good news is green whatever its severity.
func color(a notify.Alert) string {
	if a.GoodNews() {
		return "Good"
	}
	switch a.Severity {
	case notify.SeverityCritical:
		return "Attention"
	case notify.SeverityWarning:
		return "Warning"
	}
	return "Default"
}

// markdownSpecials are the characters Teams' card markdown reads as formatting or links.
var markdownSpecials = strings.NewReplacer(
	`\`, `\\`, "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "(", `\(`, ")", `\)`,
	"`", "\\`", "~", `\~`, "#", `\#`, ">", `\>`, "<", `\<`,
)

// escapeMarkdown makes text from Azure (display names are anyone's to set) show as written
// instead of as a link or formatting.
func escapeMarkdown(s string) string { return markdownSpecials.Replace(s) }
