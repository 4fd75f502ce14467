package notify

import "strings"

// Text renders an alert as plain text: the email's text part, the fallback text of chat messages.
func Text(a Alert) string {
	var b strings.Builder
	b.WriteString(a.Title())
	b.WriteString("\n\n")
	for _, l := range a.Lines() {
		b.WriteString(l[0] + ": " + l[1] + "\n")
	}
	if a.Fix != "" {
		b.WriteString("\nWhat to do: " + a.Fix + "\n")
	}
	return b.String()
}
