// Package controllers wires credwatch's reconcilers, and holds no decision or wording of its own:
// a CredentialWatch's reconcile picks the target's kind once (kindOf), runs an ordered list of
// named steps that ask the kind, and writes status once; the identities' reconciler signs each
// identity in. Each kind's adapter binds its package (internal/target/<kind>) to the
// reconciler's edges; docs/architecture.md says how the code is laid out. Azure is reached
// through clients bound to one identity and one target (internal/azure/clients), so that nothing
// here holds a credential.
package controllers
