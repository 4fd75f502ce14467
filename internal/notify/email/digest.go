package email

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/credwatch/credwatch/internal/notify"
)

// Mail is one message, rendered.
type Mail struct {
	Subject, Text, HTML string
	// ID is stable for the message, for its Message-ID and the alert header.
	ID string
}

//go:embed digest.html.tmpl
var digestSource string

// The digest's HTML escapes every value by context, as the alert's does: application names,
// credential names and hints come from whoever can edit an app registration.
var digestTemplate = template.Must(template.New("digest").Funcs(template.FuncMap{"when": when}).Parse(digestSource))

func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// DigestMail renders d as a message with a text and an HTML part from the same lines.
func DigestMail(d notify.Digest) (Mail, error) {
	var html bytes.Buffer
	if err := digestTemplate.Execute(&html, struct {
		notify.Digest
		Subject string
	}{d, d.Subject()}); err != nil {
		return Mail{}, err
	}
	return Mail{Subject: d.Subject(), Text: digestText(d), HTML: html.String(), ID: d.ID}, nil
}

func digestText(d notify.Digest) string {
	var b strings.Builder
	b.WriteString(d.Subject() + "\n\n")
	if len(d.Lines) > 0 {
		fmt.Fprintf(&b, "Credentials of your applications in tenant %s that need attention, soonest end first:\n\n", d.Tenant)
		for _, l := range d.Lines {
			ends := "ends"
			if l.State == "Expired" {
				ends = "ended"
			}
			fmt.Fprintf(&b, "- %s: %s, %s\n  %s %s\n", l.State, lineApp(l), lineCredential(l), ends, when(l.End))
			if l.Use != "" {
				fmt.Fprintf(&b, "  %s\n", l.Use)
			}
			fmt.Fprintf(&b, "  %s\n", l.Command)
		}
		b.WriteString("\n")
	}
	if len(d.Findings) > 0 {
		b.WriteString("Hygiene findings:\n\n")
		for _, f := range d.Findings {
			fmt.Fprintf(&b, "- %s: %s\n", f.Kind, f.Message)
		}
		b.WriteString("\n")
	}
	if len(d.Unused) > 0 {
		b.WriteString("Credentials nothing signs in with, as Graph's sign-in report knows (let them expire, or remove them):\n\n")
		for _, f := range d.Unused {
			fmt.Fprintf(&b, "- %s: %s\n", f.Kind, f.Message)
		}
		b.WriteString("\n")
	}
	if d.Omitted > 0 {
		fmt.Fprintf(&b, "%d more left out of this message for length.\n\n", d.Omitted)
	}
	b.WriteString(d.Why + "\n")
	return b.String()
}

func lineApp(l notify.DigestLine) string {
	if l.Application == "" {
		return "appId " + l.AppID
	}
	return fmt.Sprintf("%q (appId %s)", l.Application, l.AppID)
}

func lineCredential(l notify.DigestLine) string {
	kind := "secret"
	if l.Type == "Certificate" {
		kind = "certificate"
	}
	var parts []string
	if l.DisplayName != "" {
		parts = append(parts, fmt.Sprintf("%q", notify.Shown(l.DisplayName)))
	}
	if l.Hint != "" {
		parts = append(parts, "hint "+l.Hint)
	}
	parts = append(parts, "keyId "+l.KeyID, "on the "+l.Object+" object")
	return kind + " " + strings.Join(parts, ", ")
}
