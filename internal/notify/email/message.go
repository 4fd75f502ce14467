package email

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"html/template"
	"regexp"
	"strings"

	gomail "github.com/wneessen/go-mail"

	"github.com/credwatch/credwatch/internal/notify"
)

// HeaderAlertID carries the alert's ID, for mail rules and for people tracing a message back.
const HeaderAlertID = "X-Credwatch-Alert-Id"

//go:embed alert.html.tmpl
var htmlSource string

// html/template escapes every value by context: display names, hints and problems come from Azure
// and from whoever can edit the app registration.
var htmlTemplate = template.Must(template.New("alert").Parse(htmlSource))

// severityColors are fixed strings: the template puts the color in a style attribute, where only
// a value from this table may go.
var severityColors = map[notify.Severity]string{
	notify.SeverityInfo:     "#1f6feb",
	notify.SeverityWarning:  "#bf8700",
	notify.SeverityCritical: "#cf222e",
}

// renderHTML renders the HTML part from the same title and lines as the text part.
func renderHTML(a notify.Alert) (string, error) {
	color, ok := severityColors[a.Severity]
	if !ok {
		color = "#656d76"
	}
	var b bytes.Buffer
	err := htmlTemplate.Execute(&b, struct {
		Title, Fix, Color, ID string
		Lines                 [][2]string
	}{Title: a.Title(), Fix: a.Fix, Color: color, ID: a.ID, Lines: a.Lines()})
	return b.String(), err
}

// AlertMail renders a as a message.
func AlertMail(a notify.Alert) (Mail, error) {
	html, err := renderHTML(a)
	if err != nil {
		return Mail{}, err
	}
	return Mail{Subject: a.Title(), Text: notify.Text(a), HTML: html, ID: a.ID}, nil
}

func (c *Channel) message(to []string, mail Mail) (*gomail.Msg, error) {
	m := gomail.NewMsg()
	m.FromMailAddress(c.from)
	if err := m.To(to...); err != nil {
		return nil, err
	}
	m.Subject(mail.Subject)
	if mail.ID != "" {
		m.SetGenHeader(HeaderAlertID, mail.ID)
		m.SetMessageIDWithValue(messageID(mail.ID, c.from.Address))
	}
	// Precedence: bulk and X-Auto-Response-Suppress keep out-of-office replies away from the sender.
	m.SetBulk()
	m.SetBodyString(gomail.TypeTextPlain, mail.Text)
	m.AddAlternativeString(gomail.TypeTextHTML, mail.HTML)
	return m, nil
}

var messageIDSafe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// messageID is the same for every send of one alert, so a client showing a duplicate (a retry
// after a lost reply) collapses it. The right side is the sender's domain, as RFC 5322 suggests.
func messageID(alertID, from string) string {
	id := alertID
	if !messageIDSafe.MatchString(id) {
		sum := sha256.Sum256([]byte(alertID))
		id = hex.EncodeToString(sum[:16])
	}
	domain := "credwatch.invalid"
	if at := strings.LastIndexByte(from, '@'); at >= 0 && at < len(from)-1 {
		domain = from[at+1:]
	}
	return "credwatch." + id + "@" + domain
}
