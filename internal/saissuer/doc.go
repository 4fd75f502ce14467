// Package saissuer checks the service-account token issuer of a cluster across its API servers:
// the keys each serves in its JWKS, the key each signs with, whether each accepts the tokens the
// others sign, and the issuer URL. During a rolling control-plane upgrade an API server that signs
// or verifies with a different key locks pods out of the API ("service account token has been
// invalidated", "error in cryptographic primitive"); this sees it while it happens.
package saissuer
