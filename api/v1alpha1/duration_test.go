package v1alpha1

import (
	"testing"
	"time"
)

func TestDurationParse(t *testing.T) {
	tests := []struct {
		in      Duration
		want    time.Duration
		wantErr bool
	}{
		{in: "30d", want: 30 * 24 * time.Hour},
		{in: "2w", want: 14 * 24 * time.Hour},
		{in: "720h", want: 720 * time.Hour},
		{in: "90m", want: 90 * time.Minute},
		{in: "45s", want: 45 * time.Second},
		{in: "0d", want: 0},
		{in: "", wantErr: true},
		{in: "30", wantErr: true},
		{in: "1h30m", wantErr: true},
		{in: "30 days", wantErr: true},
		{in: "-5d", wantErr: true},
		{in: "1y", wantErr: true},
		{in: "1234567d", wantErr: true},
	}
	for _, tc := range tests {
		got, err := tc.in.Parse()
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Duration(%q).Parse() = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
