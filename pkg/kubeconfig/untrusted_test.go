package kubeconfig

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
)

const plainKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://10.1.2.3:6443
    certificate-authority-data: Q0E=
    tls-server-name: api.example
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
    token: secret-token
`

// withUser replaces the user block of plainKubeconfig.
func withUser(user string) string {
	i := strings.Index(plainKubeconfig, "users:")
	return plainKubeconfig[:i] + "users:\n- name: u\n  user:\n" + user
}

func withCluster(cluster string) string {
	return strings.Replace(plainKubeconfig, "    server: https://10.1.2.3:6443\n    certificate-authority-data: Q0E=\n    tls-server-name: api.example\n", cluster, 1)
}

func TestFromUntrustedKeepsOnlyData(t *testing.T) {
	cfg, err := FromUntrusted([]byte(plainKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.1.2.3:6443" || string(cfg.CAData) != "CA" || string(cfg.CertData) != "CERT" ||
		string(cfg.KeyData) != "KEY" || cfg.BearerToken != "secret-token" || cfg.ServerName != "api.example" {
		t.Fatalf("config %+v does not carry the kubeconfig's data", cfg)
	}
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" || cfg.CAFile != "" ||
		cfg.CertFile != "" || cfg.KeyFile != "" || !cfg.DisableCompression || cfg.WrapTransport == nil {
		t.Fatalf("config %+v has more than data", cfg)
	}
	if proxy, err := cfg.Proxy(nil); cfg.Proxy == nil || proxy != nil || err != nil {
		t.Fatal("the config would use the environment's proxy")
	}
}

func TestFromUntrustedRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, kubeconfig, field string
	}{
		{"an exec plugin", withUser("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, 'touch /tmp/pwned']\n"), "users[u].user.exec"},
		{"an auth provider", withUser("    auth-provider:\n      name: gcp\n      config: {cmd-path: /bin/sh}\n"), "users[u].user.auth-provider"},
		{"a token file", withUser("    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n"), "users[u].user.tokenFile"},
		{"a client certificate file", withUser("    client-certificate: /data/pki/admin.crt\n    client-key-data: S0VZ\n"), "users[u].user.client-certificate"},
		{"a client key file", withUser("    client-certificate-data: Q0VSVA==\n    client-key: /data/pki/admin.key\n"), "users[u].user.client-key"},
		{"basic auth", withUser("    username: admin\n    password: admin\n"), "users[u].user.username"},
		{"impersonation", withUser("    token: t\n    as: system:admin\n"), "users[u].user.as"},
		{"a CA file", withCluster("    server: https://10.1.2.3:6443\n    certificate-authority: /data/pki/ca.crt\n"), "clusters[c].cluster.certificate-authority"},
		{"a proxy", withCluster("    server: https://10.1.2.3:6443\n    proxy-url: http://127.0.0.1:8080\n"), "clusters[c].cluster.proxy-url"},
		{"plain http", withCluster("    server: http://10.1.2.3:6443\n"), "clusters[c].cluster.server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromUntrusted([]byte(tc.kubeconfig))
			var unsafe *UnsafeError
			if !errors.As(err, &unsafe) {
				t.Fatalf("got %v, want an UnsafeError", err)
			}
			if !strings.Contains(unsafe.Field, tc.field) {
				t.Fatalf("refused %q, want the field %q named", unsafe.Field, tc.field)
			}
		})
	}
}

func TestFromUntrustedInvalid(t *testing.T) {
	for _, tc := range []struct{ name, kubeconfig string }{
		{"not YAML", "{"},
		{"no contexts", "apiVersion: v1\nkind: Config\n"},
		{"a missing cluster", strings.Replace(plainKubeconfig, "cluster: c, user: u", "cluster: other, user: u", 1)},
		{"a missing user", strings.Replace(plainKubeconfig, "cluster: c, user: u", "cluster: c, user: other", 1)},
		{"no server", withCluster("    insecure-skip-tls-verify: true\n")},
		{"too large", plainKubeconfig + "# " + strings.Repeat("x", MaxUntrustedSize)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromUntrusted([]byte(tc.kubeconfig))
			var unsafe *UnsafeError
			if err == nil || errors.As(err, &unsafe) {
				t.Fatalf("got %v, want an error that is not an UnsafeError", err)
			}
		})
	}
}

func TestAddressPolicy(t *testing.T) {
	own := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.5:6443"), netip.MustParseAddrPort("0.0.0.0:7443")}
	local := func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("192.168.1.10"), Mask: net.CIDRMask(24, 32)}}, nil
	}
	for _, tc := range []struct {
		name    string
		addr    string
		allowed []string
		refused bool
		private bool // with RefusePrivate
	}{
		{"a downstream cluster", "10.0.0.9:6443", nil, false, false},
		{"loopback", "127.0.0.1:6443", nil, true, false},
		{"loopback in IPv6", "[::1]:6443", nil, true, false},
		{"loopback as a mapped IPv6 address", "[::ffff:127.0.0.1]:6443", nil, true, false},
		{"the cloud metadata service", "169.254.169.254:80", nil, true, false},
		{"IPv6 link-local", "[fe80::1]:6443", nil, true, false},
		{"the unspecified address", "0.0.0.0:6443", nil, true, false},
		{"multicast", "224.0.0.1:6443", nil, true, false},
		{"the hub's API server", "10.0.0.5:6443", nil, true, false},
		{"another port of the hub's machine", "10.0.0.5:6444", nil, false, false},
		{"the hub's port on a local address when it listens on all", "192.168.1.10:7443", nil, true, false},
		{"that port on another machine", "192.168.1.11:7443", nil, false, false},
		{"loopback an admin allows", "127.0.0.1:6445", []string{"127.0.0.0/8"}, false, false},
		{"one address an admin allows", "169.254.10.1:443", []string{"169.254.10.1"}, false, false},
		{"loopback outside what an admin allows", "127.0.0.1:6445", []string{"10.0.0.0/8"}, true, false},
		{"the metadata service through NAT64", "[64:ff9b::a9fe:a9fe]:80", nil, true, false},
		{"loopback through a local NAT64 prefix", "[64:ff9b:1::7f00:1]:6443", nil, true, false},
		{"the metadata service in 6to4", "[2002:a9fe:a9fe::1]:80", nil, true, false},
		{"loopback in Teredo", "[2001:0:4136:e378:8000:63bf:80ff:fffe]:6443", nil, true, false},
		{"the hub's API server as IPv4-compatible IPv6", "[::10.0.0.5]:6443", nil, true, false},
		{"a downstream cluster through NAT64", "[64:ff9b::a00:9]:6443", nil, false, false},
		{"a downstream cluster in 6to4", "[2002:a00:9::1]:6443", nil, false, false},
		{"an ordinary IPv6 address", "[2001:db8::1]:6443", nil, false, false},
		{"a private address refused", "10.0.0.9:443", nil, true, true},
		{"172.16/12 refused", "172.31.255.1:443", nil, true, true},
		{"192.168/16 refused", "192.168.1.11:443", nil, true, true},
		{"shared address space refused", "100.64.0.1:443", nil, true, true},
		{"IPv6 unique local refused", "[fd00::1]:443", nil, true, true},
		{"a private address through NAT64 refused", "[64:ff9b::a00:9]:443", nil, true, true},
		{"a private address an admin allows", "10.0.0.9:443", []string{"10.0.0.0/8"}, false, true},
		{"a public address with private ones refused", "8.8.8.8:443", nil, false, true},
		{"next to 172.16/12", "172.32.0.1:443", nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed, err := ParsePrefixes(tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			p := &AddressPolicy{Allowed: allowed, Own: own, localAddrs: local, RefusePrivate: tc.private}
			err = p.Control("tcp", tc.addr, nil)
			var refused *AddressError
			if tc.refused != errors.As(err, &refused) || (!tc.refused && err != nil) {
				t.Fatalf("Control(%s) = %v, want refused=%v", tc.addr, err, tc.refused)
			}
		})
	}
}

func TestParsePrefixes(t *testing.T) {
	if _, err := ParsePrefixes([]string{"not-a-network"}); err == nil {
		t.Fatal("a bad CIDR was accepted")
	}
	got, err := ParsePrefixes([]string{"127.0.0.1/8", "::1"})
	if err != nil || got[0].String() != "127.0.0.0/8" || got[1].String() != "::1/128" {
		t.Fatalf("ParsePrefixes = %v, %v", got, err)
	}
}

// FuzzFromUntrusted: whatever a Secret holds, parsing it neither panics nor yields a
// configuration that runs code, reads files or uses a proxy.
func FuzzFromUntrusted(f *testing.F) {
	f.Add([]byte(plainKubeconfig))
	f.Add([]byte(withUser("    exec:\n      command: /bin/sh\n")))
	f.Add([]byte(withCluster("    server: https://[::1]:6443\n    proxy-url: socks5://x\n")))
	f.Add([]byte("current-context: a\ncontexts: [{name: a, context: {cluster: a}}]\nclusters: [{name: a, cluster: {server: 'https://a'}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := FromUntrusted(data)
		if err != nil {
			return
		}
		if cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.BearerTokenFile != "" || cfg.CAFile != "" ||
			cfg.CertFile != "" || cfg.KeyFile != "" || cfg.Dial != nil || cfg.Impersonate.UserName != "" || !cfg.DisableCompression {
			t.Fatalf("FromUntrusted accepted %q as %+v", data, cfg)
		}
		if !strings.HasPrefix(cfg.Host, "https://") {
			t.Fatalf("FromUntrusted accepted the server %q", cfg.Host)
		}
	})
}

func TestResponsesAreLimited(t *testing.T) {
	big := strings.NewReader(strings.Repeat("x", MaxResponse+10))
	body := &limitedBody{ReadCloser: io.NopCloser(big), left: MaxResponse, url: "https://x"}
	if n, err := io.Copy(io.Discard, body); err == nil || n > MaxResponse+1 {
		t.Fatalf("read %d bytes of a response over the limit (err=%v)", n, err)
	}
	small := &limitedBody{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat("x", MaxResponse))), left: MaxResponse, url: "https://x"}
	if n, err := io.Copy(io.Discard, small); err != nil || n != MaxResponse {
		t.Fatalf("a response at the limit: %d bytes, %v", n, err)
	}
}
