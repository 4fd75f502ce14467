// Package azure holds what credwatch's Azure clients share: which cloud to talk to (authority,
// Graph and Resource Manager endpoints, so sovereign clouds and local fakes work alike) and the identities the
// operator signs in with, cached so that tokens are reused across reconciles.
package azure
