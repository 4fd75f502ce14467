package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Headers of every delivery. The signature headers are set only when the channel has a key.
const (
	// HeaderDelivery carries the alert ID: the same alert sent again has the same one, so a
	// receiver can drop duplicates.
	HeaderDelivery = "X-Credwatch-Delivery"
	// HeaderTimestamp is the sending time in Unix seconds; it is part of the signed string, so a
	// receiver that rejects old timestamps cannot be fed a recorded delivery again.
	HeaderTimestamp = "X-Credwatch-Timestamp"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of "<timestamp>.<body>".
	HeaderSignature = "X-Credwatch-Signature"
)

const signaturePrefix = "sha256="

// ErrInvalidSignature is wrapped by every error Verify returns.
var ErrInvalidSignature = errors.New("invalid webhook signature")

// Verify checks that signature is what credwatch sends for body and timestamp with key. It does
// not judge the timestamp's age: receivers should also reject deliveries whose timestamp is more
// than a few minutes from their clock, or a recorded delivery could be replayed.
func Verify(body []byte, timestamp, signature string, key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: no key to verify with", ErrInvalidSignature)
	}
	if timestamp == "" || strings.Trim(timestamp, "0123456789") != "" {
		return fmt.Errorf("%w: timestamp %q is not Unix seconds", ErrInvalidSignature, timestamp)
	}
	hexSum, ok := strings.CutPrefix(signature, signaturePrefix)
	if !ok {
		return fmt.Errorf("%w: it does not start with %q", ErrInvalidSignature, signaturePrefix)
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return fmt.Errorf("%w: it is not hex", ErrInvalidSignature)
	}
	if !hmac.Equal(got, mac(key, timestamp, body)) {
		return fmt.Errorf("%w: it does not match the body, timestamp and key", ErrInvalidSignature)
	}
	return nil
}

// sign returns the HeaderSignature value for body sent at timestamp.
func sign(key []byte, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(key, timestamp, body))
}

func mac(key []byte, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
