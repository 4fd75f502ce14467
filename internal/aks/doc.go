// Package aks reads AKS managed clusters through Azure Resource Manager with armcontainerservice
// (which service principal a cluster signs in with, or whether it uses a managed identity) and
// resets their service principal profile, as a long-running operation followed by resume token.
// It is the only package that imports armcontainerservice, and it turns its errors into azerr.Error.
package aks
