package registration

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestHubProxyChoosesTheProxy(t *testing.T) {
	proxy := HubProxy{URL: "http://proxy.example.com:3128", NoProxy: ".internal,10.0.0.0/8,direct.example.com"}
	choose := proxy.Func()
	for _, c := range []struct {
		name, hub, want string
	}{
		{"a hub by name", "https://hub.example.com:6443", "http://proxy.example.com:3128"},
		{"a hub by address", "https://192.0.2.10:6443", "http://proxy.example.com:3128"},
		{"a domain in the no-proxy list", "https://hub.internal:6443", ""},
		{"an address in a no-proxy CIDR", "https://10.1.2.3:6443", ""},
		{"a host in the no-proxy list", "https://direct.example.com", ""},
		{"a subdomain of a host in the list", "https://a.direct.example.com", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, c.hub, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := choose(req)
			if err != nil {
				t.Fatal(err)
			}
			if gotURL := urlString(got); gotURL != c.want {
				t.Errorf("proxy of %s: %q, want %q", c.hub, gotURL, c.want)
			}
		})
	}
}

func TestHubProxyValidate(t *testing.T) {
	for _, c := range []struct {
		name  string
		proxy HubProxy
		want  string
	}{
		{"none", HubProxy{}, ""},
		{"http", HubProxy{URL: "http://proxy:3128", NoProxy: ".internal"}, ""},
		{"socks5", HubProxy{URL: "socks5://proxy:1080"}, ""},
		{"no scheme", HubProxy{URL: "proxy.example.com:3128"}, "the scheme must be http, https or socks5"},
		{"ftp", HubProxy{URL: "ftp://proxy:21"}, "the scheme must be http, https or socks5"},
		{"no host", HubProxy{URL: "http://"}, "names no host"},
		{"a no-proxy list alone", HubProxy{NoProxy: ".internal"}, "--hub-no-proxy needs --hub-proxy"},
		{"too long", HubProxy{URL: "http://" + strings.Repeat("a", 5000)}, "at most 4096 bytes"},
		{"a password is not repeated", HubProxy{URL: "ftp://user:s3cret@proxy:21"}, "xxxxx"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.proxy.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one saying %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Fatalf("the error repeats the password: %v", err)
			}
		})
	}
}

func TestHubProxyStringHidesThePassword(t *testing.T) {
	s := HubProxy{URL: "http://user:s3cret@proxy.example.com:3128", NoProxy: ".internal"}.String()
	if strings.Contains(s, "s3cret") || !strings.Contains(s, "proxy.example.com:3128") || !strings.Contains(s, ".internal") {
		t.Errorf("String() = %q", s)
	}
}

func urlString(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.String()
}
