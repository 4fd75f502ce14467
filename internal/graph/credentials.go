package graph

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// Type tells a client secret from a certificate.
type Type string

// The types of credential.
const (
	Password    Type = "Password"
	Certificate Type = "Certificate"
)

// Source is the Graph object a credential hangs on.
type Source string

// The objects a credential hangs on.
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
	// AppID is the appId, in lower case as Graph writes GUIDs.
	AppID                    string
	DisplayName              string
	ApplicationObjectID      string
	ServicePrincipalObjectID string
	// SingleSignOnMode is the service principal's preferredSingleSignOnMode (saml, oidc,
	// password, notSupported), empty when unset or when there is no service principal.
	SingleSignOnMode string
	Credentials      []Credential
	// ReadAt is when Graph was asked for what the snapshot holds: the request, the listing or
	// the delta round. Zero where the reader does not say.
	ReadAt time.Time
}

// Add adds o, the application or the service principal of s's appId, to s. The application's
// name wins: the service principal's is a copy of it.
func (s *Snapshot) Add(o Object) {
	if o.Source == Application {
		s.ApplicationObjectID = o.ObjectID
		s.DisplayName = o.DisplayName
	} else {
		s.ServicePrincipalObjectID = o.ObjectID
		s.SingleSignOnMode = o.SingleSignOnMode
		if s.DisplayName == "" {
			s.DisplayName = o.DisplayName
		}
	}
	s.Credentials = append(s.Credentials, o.Credentials...)
}

// NewSecret is a client secret just created by addPassword: the one moment its text is known.
// Its String method leaves the text out, so that printing one by mistake leaks nothing.
type NewSecret struct {
	KeyID string
	// Text is the secret itself. It goes to the Kubernetes Secret and the AKS request only.
	Text       string
	Hint       string
	Start, End time.Time
}

// String describes the secret without its text.
func (s NewSecret) String() string {
	return "secret " + s.KeyID + " (hint " + s.Hint + ", ends " + s.End.UTC().Format(time.RFC3339) + ")"
}

// GoString keeps %#v from printing the text too.
func (s NewSecret) GoString() string { return s.String() }

// Read is the outcome of reading one appId's credentials in a batch: its Snapshot, or the error
// reading it alone would have returned.
type Read struct {
	Snapshot Snapshot
	Err      error
}

// FailedReads is n reads that all failed with err, as when a whole batch fails.
func FailedReads(n int, err error) []Read {
	out := make([]Read, n)
	for i := range out {
		out[i].Err = err
	}
	return out
}

// AppRef names an application: by appId, which reads address, and by the object ID of its
// application object, which writes address. A struct, so that the two cannot be swapped; the
// object ID is empty until a read has found it.
type AppRef struct {
	AppID, ObjectID string
}

// AppClient is one application and its service principal in one tenant, as one identity sees
// them.
type AppClient interface {
	// ReadCredentials reads the credentials of the application and of its service principal,
	// in a request sent after the call: what it returns is no older than the caller's writes.
	ReadCredentials(ctx context.Context) (Snapshot, error)
	// Check returns the credentials read since ask.Asker asked for them, or ErrPending after
	// asking for them. A sweep of many watches costs far less this way, their reads planned
	// together.
	Check(ctx context.Context, ask Ask) (Snapshot, error)
	// ReadOwnerEmails reads the mail addresses of the application's owners.
	ReadOwnerEmails(ctx context.Context) ([]string, error)
	// VerifiedDomains reads the domains the application's tenant verified.
	VerifiedDomains(ctx context.Context) ([]string, error)
	// ReadSignIns reads when each credential of the application and its service principal last
	// signed in, as Graph's beta report has it (ErrSignInsUnlicensed without Entra ID P1 or P2).
	ReadSignIns(ctx context.Context) ([]KeyUse, error)
	// ReadCredentialAudits reads the directory audit log's changes to the credentials of the
	// object with objectID (the application's or the service principal's) since since.
	ReadCredentialAudits(ctx context.Context, objectID string, since time.Time) ([]Audit, error)
	// AddPassword adds a client secret named displayName, valid until end, to the application.
	AddPassword(ctx context.Context, displayName string, end time.Time) (NewSecret, error)
	// RemovePassword removes the application's secret keyID.
	RemovePassword(ctx context.Context, keyID string) error
}

// Ask is a check asking for an appId's credentials.
type Ask struct {
	// Asker is who asks, a watch: an answer goes to those who asked for it, and no one else.
	// An asker waits for one answer at a time: asking for another appId, or through another
	// identity, withdraws what it asked before.
	Asker string
	// Wake is called when the answer is in.
	Wake func()
	// MayList says the identity may list the whole tenant, as a tenant scan does: when most of
	// a tenant is due, one listing reads it for less than lists naming each appId.
	MayList bool
	// Known is what the asker knows of the application, as of KnownAt, when it knows it: an
	// identity that may list the tenant may then be answered from Graph's changes since.
	Known   *Snapshot
	KnownAt time.Time
	// Waits says the asker waits for the answer where it asked, as a fleet's check does within
	// its reconcile: its batch is never held back until other askers take their answers, which
	// the reconciles it holds up may be the ones to take.
	Waits bool
}

// Object is an application or a service principal as a tenant scan reads it.
type Object struct {
	Source Source
	// AppID is the appId, in lower case as Graph writes GUIDs.
	AppID       string
	ObjectID    string
	DisplayName string
	// SingleSignOnMode is a service principal's preferredSingleSignOnMode; empty on an application.
	SingleSignOnMode string
	// AppOwnerTenantID is a service principal's appOwnerOrganizationId, in lower case: the tenant
	// its application is registered in. Empty on an application, and when Graph gives none.
	AppOwnerTenantID string
	// Tags are an application's tags, read by tenant scans only.
	Tags        []string
	Credentials []Credential
}

// TenantClient is every application and service principal of one tenant, as one identity sees
// them.
type TenantClient interface {
	// Scan reads the objects filter (OData, empty for all) selects, and hands each to visit as it
	// arrives, one call at a time: Graph's objects for a tenant of 100,000 are never held at once.
	Scan(ctx context.Context, filter string, visit func(Object)) error
	// ReadOwners reads the owners of the applications with these object IDs, in $batch
	// requests of MaxBatchOwners, one result each in their order. It stops early when ctx ends:
	// the reads not sent fail with its error.
	ReadOwners(ctx context.Context, applicationIDs []string) []OwnersRead
	// ReadSignIns reads when each credential of the tenant last signed in, the whole report page
	// by page, and hands each to visit; on error what visit was given is incomplete. A tenant
	// without Entra ID P1 or P2 fails with ErrSignInsUnlicensed.
	ReadSignIns(ctx context.Context, visit func(KeyUse)) error
}

// MaxBatchOwners is how many applications' owners one $batch reads: Graph takes 20 requests.
const MaxBatchOwners = 20

// Owner is an owner of an application: a user, or a service principal, which has no mailbox.
type Owner struct {
	ID, DisplayName string
	// Mail is a user's mail address, empty for a user without a mailbox and for a service
	// principal; UserPrincipalName is the user's sign-in name, which may not receive mail.
	Mail, UserPrincipalName string
	ServicePrincipal        bool
}

// OwnersRead is the outcome of reading one application's owners in a batch.
type OwnersRead struct {
	Owners []Owner
	Err    error
}

// MaxInList is how many values Graph takes in one `in` clause of a $filter, by default.
const MaxInList = 15

// What one $batch, which Graph takes of 20 requests, reads: two requests for each appId read by
// point reads (its application and its service principal), or two lists for each MaxInList.
const (
	MaxBatchAppIDs  = 10
	MaxListedAppIDs = 10 * MaxInList
)

// ErrNotListed is an appId a list read did not return. Graph's replicas lag behind its writes, so
// this is not "not found": a point read must confirm that.
var ErrNotListed = errors.New("no list Graph answered holds it")

// ErrPending is a check whose answer is not in yet: the caller is woken when it is.
var ErrPending = errors.New("the read is planned and its answer not in yet")

// IsGUID reports whether s is a GUID as Graph writes them: 36 characters, hexadecimal and dashes.
func IsGUID(s string) bool {
	return len(s) == 36 && uuid.Validate(s) == nil
}

// KeyUse is when a credential last signed in, as Graph's sign-in activity report has it: the
// report is refreshed in the background, hours behind, and may count sign-ins that did not
// complete. LastSignIn is zero when the report knows of none. AppID, in lower case, is the
// application whose credential it is: keyIds are chosen by whoever adds a certificate, so a keyId
// alone does not name one credential of a tenant.
type KeyUse struct {
	AppID      string
	KeyID      string
	Source     Source
	LastSignIn time.Time
}

// ReportsPer10s is how many requests credwatch sends Graph's reports service in ten seconds, per
// identity and tenant: it takes five (Graph's throttling limits), and one is left to others.
const ReportsPer10s = 4

// ErrSignInsUnlicensed: the tenant has no Entra ID P1 or P2, which the sign-in activity reports
// need; Graph answers 403 Authentication_RequestFromNonPremiumTenantOrB2CTenant.
var ErrSignInsUnlicensed = errors.New("the tenant has no Entra ID P1 or P2 licence, which Graph's sign-in activity reports need")

// Audit is one change to an object's credentials, as the directory audit log has it.
type Audit struct {
	Time     time.Time
	Activity string
	// User is the user principal name of who made the change, App the application's name when
	// an application made it.
	User, App string
	// KeyIDs are the keyIds the change added: there after it, and not before.
	KeyIDs []string
}
