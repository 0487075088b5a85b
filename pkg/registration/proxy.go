package registration

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpproxy"
)

// HubProxy is the HTTP(S) proxy of an agent's connections to its hub, and of those
// only: the agent reaches its own cluster's API directly.
type HubProxy struct {
	// URL of the proxy (http://, https:// or socks5://, with user:password@ if it
	// wants them). Empty means the environment's HTTPS_PROXY and NO_PROXY.
	URL string
	// NoProxy lists, comma-separated, the hosts reached without the proxy: names
	// (a leading dot or none for a domain and its subdomains), IP addresses, CIDRs,
	// each with an optional :port; * for all.
	NoProxy string
}

// maxProxySetting bounds each proxy setting: they come from chart values.
const maxProxySetting = 4096

// Validate says what is wrong with p, in terms of the agent's flags.
func (p HubProxy) Validate() error {
	if len(p.URL) > maxProxySetting || len(p.NoProxy) > maxProxySetting {
		return fmt.Errorf("--hub-proxy and --hub-no-proxy are at most %d bytes each", maxProxySetting)
	}
	if p.URL == "" {
		if p.NoProxy != "" {
			return fmt.Errorf("--hub-no-proxy needs --hub-proxy (without it the agent uses HTTPS_PROXY and NO_PROXY)")
		}
		return nil
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		return fmt.Errorf("--hub-proxy %q is not a URL: %w", redactProxy(p.URL), err)
	}
	switch u.Scheme {
	case "http", "https", "socks5":
	default:
		return fmt.Errorf("--hub-proxy %q: the scheme must be http, https or socks5, e.g. http://proxy.example.com:3128", redactProxy(p.URL))
	}
	if u.Host == "" {
		return fmt.Errorf("--hub-proxy %q names no host, e.g. http://proxy.example.com:3128", redactProxy(p.URL))
	}
	return nil
}

// Func chooses the proxy of a request to the hub, as http.Transport.Proxy does.
func (p HubProxy) Func() func(*http.Request) (*url.URL, error) {
	if p.URL == "" {
		return http.ProxyFromEnvironment
	}
	choose := (&httpproxy.Config{HTTPProxy: p.URL, HTTPSProxy: p.URL, NoProxy: p.NoProxy}).ProxyFunc()
	return func(req *http.Request) (*url.URL, error) { return choose(req.URL) }
}

// String describes p for logs and messages, without a password.
func (p HubProxy) String() string {
	if p.URL == "" {
		return "the environment's HTTPS_PROXY (" + orNone(redactProxy(httpproxy.FromEnvironment().HTTPSProxy)) + ")"
	}
	s := redactProxy(p.URL)
	if p.NoProxy != "" {
		s += " (not for " + p.NoProxy + ")"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// redactProxy is a proxy URL with its password, if any, replaced.
func redactProxy(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			return "…" + raw[i:]
		}
		return raw
	}
	return u.Redacted()
}
