package clientip

import (
	"net/http/httptest"
	"testing"
)

func TestKey(t *testing.T) {
	trusted, err := ParseTrusted("10.0.0.0/8, 192.168.1.1, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"plain v4", "203.0.113.5:1234", nil, "ip:203.0.113.5"},
		{"v6 by /64", "[2001:db8:1:2:3:4:5:6]:443", nil, "ip:2001:db8:1:2::/64"},
		{"same /64", "[2001:db8:1:2:ffff::1]:443", nil, "ip:2001:db8:1:2::/64"},
		{"v4-mapped v6", "[::ffff:203.0.113.5]:1", nil, "ip:203.0.113.5"},
		{"untrusted peer's XFF ignored", "203.0.113.5:1", []string{"1.1.1.1"}, "ip:203.0.113.5"},
		{"trusted peer", "10.1.2.3:1", []string{"198.51.100.7"}, "ip:198.51.100.7"},
		{"client-forged left entry ignored", "10.1.2.3:1", []string{"1.1.1.1, 198.51.100.7"}, "ip:198.51.100.7"},
		{"chain of trusted proxies", "10.1.2.3:1", []string{"198.51.100.7, 192.168.1.1", "10.9.9.9"}, "ip:198.51.100.7"},
		{"all trusted", "10.1.2.3:1", []string{"10.2.2.2"}, "ip:10.2.2.2"},
		{"garbage hop stops", "10.1.2.3:1", []string{"198.51.100.7, nonsense"}, "ip:10.1.2.3"},
		{"no XFF", "10.1.2.3:1", nil, "ip:10.1.2.3"},
		{"bad peer", "nonsense", nil, "ip:unknown"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := trusted.Key(r); got != tc.want {
			t.Errorf("%s: Key = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestParseTrustedRefuses(t *testing.T) {
	for _, s := range []string{"10.0.0.0/33", "nonsense", "10.0.0.0/8,x"} {
		if _, err := ParseTrusted(s); err == nil {
			t.Errorf("ParseTrusted(%q) succeeded", s)
		}
	}
}
