// Package rotation replaces an application's client secret, one step at a time: add a new secret
// and keep its text, wait until Entra accepts it, move an AKS cluster onto it, and retire the old
// ones once nothing may still use them. Every step is saved before the next begins, so an operator
// stopped anywhere resumes where it was.
//
// The machine reaches Graph, Resource Manager, Entra and Kubernetes only through the interfaces it
// declares here; the controller binds them to one watch, its identity and the target the rotation
// pinned when it started.
package rotation
