// Package aks reads AKS managed clusters through Azure Resource Manager with armcontainerservice
// (which service principal a cluster signs in with, or whether it uses a managed identity) and
// resets their service principal profile, as a long-running operation followed by resume token.
// For a fleet it lists a tenant's subscriptions (armsubscriptions) and their clusters, every page.
// It is the only package that imports armcontainerservice and armsubscriptions, and it turns their
// errors into azerr.Error.
package aks
