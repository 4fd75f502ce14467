package webhook

import (
	"time"

	"github.com/credwatch/credwatch/internal/alertkind"
	"github.com/credwatch/credwatch/internal/notify"
)

// SchemaVersion names the shape of Payload. Fields may be added within a version; renaming or
// removing one, or changing its meaning, makes a new version, so receivers can switch on it.
const SchemaVersion = "credwatch.dev/v1"

// Payload is the JSON body of every delivery. Every field is always present, empty when unknown,
// so receivers need no existence checks; Credential is null for alerts about checks, ImagePulls
// for alerts about anything but image pulls.
type Payload struct {
	SchemaVersion    string           `json:"schemaVersion"`
	ID               string           `json:"id"`
	Kind             alertkind.Kind   `json:"kind"`
	Severity         notify.Severity  `json:"severity"`
	Title            string           `json:"title"`
	Text             string           `json:"text"`
	At               time.Time        `json:"at"`
	Watch            Watch            `json:"watch"`
	ServicePrincipal ServicePrincipal `json:"servicePrincipal"`
	Credential       *Credential      `json:"credential"`
	ImagePulls       *ImagePulls      `json:"imagePulls"`
	Cluster          string           `json:"cluster"`
	Problem          string           `json:"problem"`
	Fix              string           `json:"fix"`
}

// Watch names the CredentialWatch that raised the alert.
type Watch struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// ServicePrincipal identifies the Entra ID service principal the alert is about.
type ServicePrincipal struct {
	DisplayName string `json:"displayName"`
	AppID       string `json:"appId"`
	TenantID    string `json:"tenantId"`
}

// ImagePulls are a registry's refusals of the cluster's image pulls.
type ImagePulls struct {
	Registry string `json:"registry"`
	// Scope is ClusterWide, NodeLocal or Undetermined (told only if it still is at the end of the
	// window); empty in a recovery.
	Scope        string   `json:"scope"`
	Nodes        []string `json:"nodes"`
	FailingNodes int      `json:"failingNodes"`
	PullingNodes int      `json:"pullingNodes"`
}

// Credential is the credential the alert is about; never a secret, only its metadata.
type Credential struct {
	KeyID       string    `json:"keyId"`
	Type        string    `json:"type"`
	Source      string    `json:"source"`
	DisplayName string    `json:"displayName"`
	Hint        string    `json:"hint"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// LastSignIn is when it last signed in, null when it never did or sign-ins are not read.
	LastSignIn *time.Time `json:"lastSignIn"`
	// Usage is "in use" or "not in use" when the watch reads sign-ins (spec.usage.signIns), empty
	// when it does not.
	Usage string `json:"usage"`
}

// NewPayload renders an alert in the webhook schema. Title and Text are notify's renderings, so a
// receiver that only forwards text says what Slack and email say.
func NewPayload(a notify.Alert) Payload {
	p := Payload{
		SchemaVersion:    SchemaVersion,
		ID:               a.ID,
		Kind:             a.Kind,
		Severity:         a.Severity,
		Title:            a.Title(),
		Text:             notify.Text(a),
		At:               a.At.UTC(),
		Watch:            Watch{Namespace: a.Namespace, Name: a.Name},
		ServicePrincipal: ServicePrincipal{DisplayName: a.DisplayName, AppID: a.AppID, TenantID: a.TenantID},
		Cluster:          a.Cluster,
		Problem:          a.Problem,
		Fix:              a.Fix,
	}
	if c := a.Credential; c != nil {
		p.Credential = &Credential{
			KeyID: c.KeyID, Type: c.Type, Source: c.Source, DisplayName: c.DisplayName, Hint: c.Hint,
			ExpiresAt: c.End.UTC(), Usage: c.Usage,
		}
		if !c.LastSignIn.IsZero() {
			t := c.LastSignIn.UTC()
			p.Credential.LastSignIn = &t
		}
	}
	if pl := a.Pulls; pl != nil {
		p.ImagePulls = &ImagePulls{Registry: pl.Registry, Scope: pl.Scope, Nodes: pl.Nodes, FailingNodes: pl.Failing, PullingNodes: pl.Pulling}
		if p.ImagePulls.Nodes == nil {
			p.ImagePulls.Nodes = []string{}
		}
	}
	return p
}
