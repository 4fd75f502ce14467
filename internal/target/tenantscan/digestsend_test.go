package tenantscan

import (
	"strings"
	"testing"
)

func TestRedactAddresses(t *testing.T) {
	got := redactAddresses(`sending email through 127.0.0.1:25: 550 5.1.1 <bob.smith@contoso.example>: Recipient address rejected; also "alice@contoso.example", ok`)
	if strings.Contains(got, "@") || strings.Count(got, "<address>") != 2 {
		t.Errorf("redacted: %s", got)
	}
}
