package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Duration is a length of time written as people write it for credentials: a whole number and one
// unit, s, m, h, d (24h) or w (7d), such as 30d, 720h or 2w. Go's time.ParseDuration has no days or
// weeks, and metav1.Duration would make users write 8760h for a year. One unit only, so that the
// CEL rules below can compare durations at admission.
//
// The format is checked by CEL rather than an OpenAPI pattern so that the rejection can say what
// is wanted, and each rule that converts the number first checks the format, so that a malformed
// value gets that one message instead of a CEL conversion error.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=8
// +kubebuilder:validation:XValidation:rule="self.matches('^[0-9]{1,6}[smhdw]$')",message="must be a whole number and one unit, s, m, h, d (days) or w (weeks), such as 30d, 2w or 720h"
// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{1,6}[smhdw]$') || int(self.substring(0, size(self)-1)) * {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 604800}[self.substring(size(self)-1)] <= 315360000",message="must be at most 3650d (ten years)"
type Duration string

var durationPattern = regexp.MustCompile(`^([0-9]{1,6})([smhdw])$`)

var durationUnits = map[string]time.Duration{
	"s": time.Second,
	"m": time.Minute,
	"h": time.Hour,
	"d": 24 * time.Hour,
	"w": 7 * 24 * time.Hour,
}

// Parse returns the duration d stands for. The API server has already validated d, so an error
// means the object did not come through it (a unit test, a client-side default).
func (d Duration) Parse() (time.Duration, error) {
	m := durationPattern.FindStringSubmatch(string(d))
	if m == nil {
		return 0, fmt.Errorf("duration %q: want a whole number and one unit of s, m, h, d or w, such as 30d", string(d))
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("duration %q: %w", string(d), err)
	}
	return time.Duration(n) * durationUnits[m[2]], nil
}
