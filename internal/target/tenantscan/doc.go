// Package tenantscan is the tenantScan target kind: it lists every application and service
// principal of a tenant, folds their credentials into what status and metrics need, keeps the
// whole between checks, and mails each application's owners a digest of what needs attention
// once a period, with a message at once when a credential of theirs expires in between. Graph,
// the mail relay, the ledger and the watch's identity are reached through the narrow interfaces
// of Scan and Owners, which the reconciler provides.
package tenantscan
