package graph

import "time"

// Type tells a client secret from a certificate.
type Type string

const (
	Password    Type = "Password"
	Certificate Type = "Certificate"
)

// Source is the Graph object a credential hangs on.
type Source string

const (
	Application      Source = "Application"
	ServicePrincipal Source = "ServicePrincipal"
)

// Credential describes one secret or certificate. It never carries the secret: Graph returns
// that only from addPassword.
type Credential struct {
	KeyID       string
	Type        Type
	Source      Source
	DisplayName string
	Hint        string
	Start       time.Time
	End         time.Time
}

// Snapshot is what Graph holds for one appId in one tenant. Either object may be absent: an
// application registered in another tenant has only a service principal here, and an app
// registration nobody consented to has no service principal yet.
type Snapshot struct {
	DisplayName              string
	ApplicationObjectID      string
	ServicePrincipalObjectID string
	Credentials              []Credential
}
