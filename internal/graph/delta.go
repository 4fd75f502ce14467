package graph

import "errors"

// Change is one object a delta round reported: created (whole), updated (its object ID and what
// was written) or removed. Each Has field says whether the round reported the property after it.
type Change struct {
	Source Source
	// ObjectID is the object's ID, in lower case.
	ObjectID string
	Removed  bool

	HasAppID bool
	AppID    string
	// HasDisplayName: the application's name, or the service principal's.
	HasDisplayName bool
	DisplayName    string
	// HasPasswords and HasCertificates: the round reported the list, whole, in Passwords or
	// Certificates.
	HasPasswords    bool
	Passwords       []Credential
	HasCertificates bool
	Certificates    []Credential
	HasSingleSignOn bool
	// SingleSignOnMode is a service principal's preferredSingleSignOnMode.
	SingleSignOnMode string
	// HasAppOwner: a service principal's appOwnerOrganizationId, in lower case.
	HasAppOwner      bool
	AppOwnerTenantID string
	// HasTags: an application's tags, which a tenant scan reads.
	HasTags bool
	Tags    []string
}

// DeltaStart names the state a round starts from when there is no deltaLink yet: Latest asks
// for a link from now on and no objects, All for every object and a link after them.
type DeltaStart string

// The ways to start.
const (
	DeltaLatest DeltaStart = "latest"
	DeltaAll    DeltaStart = "all"
)

// ErrResync is what a delta round from a link Graph no longer keeps fails with (410 Gone,
// syncStateNotFound, resyncRequired): only a new round without the link can follow.
var ErrResync = errors.New("graph no longer keeps the state behind this delta link; a new round must start without it")
