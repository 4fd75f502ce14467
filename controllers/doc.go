// Package controllers wires credwatch's reconcilers: a CredentialWatch's reconcile runs an ordered
// list of named steps and writes status once, and the identities' reconciler signs each identity
// in. A target kind that has its own package (internal/target/aksfleet, tenantscan) is bound to
// the reconciler's edges in one adapter file here; docs/architecture.md says how the code is laid
// out. Azure is reached through clients bound to one identity and one target
// (internal/azure/clients), so that nothing here holds a credential.
package controllers
