// Package azure holds what the Graph and ARM clients share: which cloud to talk to (authority,
// Graph and ARM endpoints, so sovereign clouds and local fakes work alike) and the identities
// the operator signs in with, cached so that tokens are reused across reconciles.
package azure
