// Package fakegraph is a local HTTPS stand-in for Microsoft Graph v1.0 and the Entra ID token
// endpoint, so integration tests can drive the unmodified msgraph-sdk-go (Kiota) and azidentity
// clients by changing nothing but their base URLs. It speaks the real wire format, error shapes
// included, and can inject the faults (throttling, denial, dead endpoints) that error handling
// must survive. Of beta it serves the two sign-in activity reports, fed by the secrets its token
// endpoint accepts.
package fakegraph
