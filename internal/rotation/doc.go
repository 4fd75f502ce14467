// Package rotation replaces an application's client secret, one step at a time: add a new secret
// and keep its text, wait until Entra accepts it, move an AKS cluster onto it, and retire the old
// ones once nothing may still use them. Every step is saved before the next begins, so an operator
// stopped anywhere resumes where it was.
//
// Run is one reconcile of a watch's rotation: whether one may start, what a dry run would do,
// the abort and target-change decisions, and the wind-down of a deleted watch; Machine moves the
// steps. Both reach Graph, Resource Manager, Entra and Kubernetes only through the interfaces
// declared here (Edges, Application, Cluster, Store, Ledger, Events), which the controller binds
// to one watch, its identity and the target the rotation pinned when it started. The Kubernetes
// Secrets the new secret is kept in are package secretstore's.
package rotation
