package egress

import (
	"errors"
	"flag"
	"io"
	"net/netip"
	"testing"
)

func prefixes(t *testing.T, s string) Prefixes {
	t.Helper()
	var ps Prefixes
	if err := ps.Set(s); err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestPermits(t *testing.T) {
	loopback := Policy{Allow: prefixes(t, "127.0.0.0/8,::1")}
	cluster := Policy{Deny: prefixes(t, "10.96.0.0/12,20.0.0.0/16,fd00:10:96::/108")}
	relays := Policy{Allow: prefixes(t, "10.0.0.0/8"), Deny: prefixes(t, "10.244.0.0/16")}
	mapped := Policy{Allow: prefixes(t, "::ffff:192.168.1.0/120")}
	tests := []struct {
		addr            string
		policy          Policy
		wantPermit      bool
		wantAllowlisted bool
	}{
		// The built-in ranges, and an address either side of each where one is public.
		{addr: "0.0.0.0"},
		{addr: "0.255.255.255"},
		{addr: "1.0.0.1", wantPermit: true},
		{addr: "10.0.0.1"},
		{addr: "10.255.255.255"},
		{addr: "100.63.255.255", wantPermit: true},
		{addr: "100.64.0.1"},
		{addr: "100.127.255.255"},
		{addr: "100.128.0.0", wantPermit: true},
		{addr: "127.0.0.1"},
		{addr: "127.8.9.10"},
		{addr: "168.63.129.16"},
		{addr: "168.63.129.17", wantPermit: true},
		{addr: "169.254.169.254"},
		{addr: "169.254.0.1"},
		{addr: "172.15.255.255", wantPermit: true},
		{addr: "172.16.0.1"},
		{addr: "172.31.255.255"},
		{addr: "172.32.0.0", wantPermit: true},
		{addr: "192.168.1.1"},
		{addr: "224.0.0.1"},
		{addr: "239.255.255.250"},
		{addr: "240.0.0.1"},
		{addr: "255.255.255.255"},
		{addr: "20.50.2.1", wantPermit: true},
		{addr: "::"},
		{addr: "::1"},
		{addr: "::127.0.0.1"},
		{addr: "fe80::1"},
		{addr: "fe80::1%eth0"},
		{addr: "febf::1"},
		{addr: "fc00::1"},
		{addr: "fd12:3456::1"},
		{addr: "ff02::1"},
		{addr: "2603:1030::1", wantPermit: true},
		// IPv4-mapped IPv6 and NAT64 are judged as the IPv4 address they lead to.
		{addr: "::ffff:127.0.0.1"},
		{addr: "::ffff:169.254.169.254"},
		{addr: "::ffff:10.1.2.3"},
		{addr: "::ffff:168.63.129.16"},
		{addr: "::ffff:20.50.2.1", wantPermit: true},
		{addr: "64:ff9b::a9fe:a9fe"},
		{addr: "64:ff9b::1432:201", wantPermit: true},
		// Other ways to an IPv4 address that cannot be judged as one are refused.
		{addr: "64:ff9b:1::a9fe:a9fe"},
		{addr: "64:ff9b:1:ffff::1"},
		{addr: "2002:a9fe:a9fe::1"},
		{addr: "2002:1432:201::1"},
		{addr: "192.0.0.1"},
		{addr: "192.0.0.170"},
		{addr: "192.0.1.1", wantPermit: true},
		{addr: "2001:0:4136:e378:8000:63bf:3fff:fdd2"},
		{addr: "2001:db9::1", wantPermit: true},
		{addr: "::ffff:0:a9fe:a9fe"},
		{addr: "192.88.99.1"},
		{addr: "198.18.0.1"},
		{addr: "198.19.255.255"},
		{addr: "198.20.0.1", wantPermit: true},
		// An allowance lets a built-in range through, in every spelling, and allows plain http.
		{addr: "127.0.0.1", policy: loopback, wantPermit: true, wantAllowlisted: true},
		{addr: "::ffff:127.0.0.1", policy: loopback, wantPermit: true, wantAllowlisted: true},
		{addr: "::1", policy: loopback, wantPermit: true, wantAllowlisted: true},
		{addr: "169.254.169.254", policy: loopback},
		{addr: "20.50.2.1", policy: loopback, wantPermit: true},
		{addr: "192.168.1.7", policy: mapped, wantPermit: true, wantAllowlisted: true},
		// Deny adds ranges, public ones too, and wins over Allow.
		{addr: "10.96.0.1", policy: cluster},
		{addr: "20.0.1.1", policy: cluster},
		{addr: "20.1.0.1", policy: cluster, wantPermit: true},
		{addr: "fd00:10:96::1", policy: cluster},
		{addr: "10.1.2.3", policy: relays, wantPermit: true, wantAllowlisted: true},
		{addr: "10.244.1.5", policy: relays},
		{addr: "::ffff:10.244.1.5", policy: relays},
	}
	for _, tc := range tests {
		a := netip.MustParseAddr(tc.addr)
		if got := tc.policy.Permits(a); got != tc.wantPermit {
			t.Errorf("%+v Permits(%s) = %v, want %v", tc.policy, tc.addr, got, tc.wantPermit)
		}
		if got := tc.policy.Allowlisted(a); got != tc.wantAllowlisted {
			t.Errorf("%+v Allowlisted(%s) = %v, want %v", tc.policy, tc.addr, got, tc.wantAllowlisted)
		}
	}
	if (Policy{}).Permits(netip.Addr{}) {
		t.Error("the zero Addr is permitted")
	}
}

func TestCheck(t *testing.T) {
	p := Policy{Allow: prefixes(t, "127.0.0.0/8")}
	tests := map[string]struct {
		addr    string
		plain   bool
		wantErr string
	}{
		"https to a public address":  {addr: "20.50.2.1"},
		"http to a public address":   {addr: "20.50.2.1", plain: true, wantErr: "unencrypted connection refused by the operator's destination policy: use https, or TLS for SMTP"},
		"http to an allowlisted one": {addr: "127.0.0.1", plain: true},
		"https to a refused address": {addr: "169.254.169.254", wantErr: "refused by the operator's destination policy"},
		"http to a refused address":  {addr: "169.254.169.254", plain: true, wantErr: "refused by the operator's destination policy"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := p.check(netip.MustParseAddr(tc.addr), tc.plain)
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("check = %v, want nil", err)
				}
				return
			}
			var refused *RefusedError
			if !errors.As(err, &refused) || err.Error() != tc.wantErr {
				t.Errorf("check = %v, want a *RefusedError saying %q", err, tc.wantErr)
			}
		})
	}
}

// The dialer judges the address it is handed after DNS, as "host:port", before connecting.
func TestDialerControl(t *testing.T) {
	control := Policy{Allow: prefixes(t, "127.0.0.0/8")}.Dialer().Control
	for address, wantRefused := range map[string]bool{
		"169.254.169.254:80":   true,
		"[fe80::1%eth0]:443":   true,
		"[::ffff:10.0.0.1]:25": true,
		"168.63.129.16:32526":  true,
		"not an address":       true,
		"127.0.0.1:8080":       false,
		"20.50.2.1:587":        false,
		"[2603:1030::1]:443":   false,
	} {
		var refused *RefusedError
		if err := control("tcp", address, nil); errors.As(err, &refused) != wantRefused || (err != nil && !wantRefused) {
			t.Errorf("Control(%s) = %v, want refused %v", address, err, wantRefused)
		}
	}
}

func TestPrefixesFlag(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    string
		wantErr bool
	}{
		"none":                   {want: ""},
		"a list":                 {args: []string{"--cidrs=127.0.0.0/8, ::1/128"}, want: "127.0.0.0/8,::1/128"},
		"repeated":               {args: []string{"--cidrs=10.96.0.0/12", "--cidrs=10.244.0.0/16"}, want: "10.96.0.0/12,10.244.0.0/16"},
		"an address alone":       {args: []string{"--cidrs=168.63.129.16,fd00::1"}, want: "168.63.129.16/32,fd00::1/128"},
		"host bits are dropped":  {args: []string{"--cidrs=10.1.2.3/8"}, want: "10.0.0.0/8"},
		"IPv4-mapped as IPv4":    {args: []string{"--cidrs=::ffff:10.0.0.0/104"}, want: "10.0.0.0/8"},
		"not a range":            {args: []string{"--cidrs=cluster.local"}, wantErr: true},
		"a prefix out of bounds": {args: []string{"--cidrs=10.0.0.0/33"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var ps Prefixes
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.Var(&ps, "cidrs", "")
			err := fs.Parse(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse = %v, want error %v", err, tc.wantErr)
			}
			if got := ps.String(); !tc.wantErr && got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}
