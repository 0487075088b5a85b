package kubeconfig

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// MaxUntrustedSize bounds a kubeconfig read from a Secret: a Cluster API kubeconfig is
// a few kilobytes, and parsing YAML costs memory in proportion to its size.
const MaxUntrustedSize = 256 << 10

// UnsafeError says which field of an untrusted kubeconfig the hub refuses and why.
type UnsafeError struct {
	// Field is where the field is, as kubectl config view prints it
	// (users[admin].user.exec).
	Field string
	// Why is what the field would make the hub do.
	Why string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("%s is not allowed: %s", e.Field, e.Why)
}

// FromUntrusted builds a client configuration from a kubeconfig given by someone
// with fewer rights than the hub (a workspace user's Secret, Cluster API's): data,
// never code. Only its current context's server URL (https), TLS server name,
// CA data, client certificate and key data and token are used; a field that would
// run a program (exec, auth-provider), read a file of the hub's (tokenFile,
// client-certificate, client-key, certificate-authority) or send the traffic
// elsewhere (proxy-url) is refused with an *UnsafeError naming it. Other errors
// are a kubeconfig that cannot be parsed or used. Where the server may be reached is
// the dialer's business (see AddressPolicy).
func FromUntrusted(data []byte) (*rest.Config, error) {
	if len(data) > MaxUntrustedSize {
		return nil, fmt.Errorf("the kubeconfig is %d bytes, more than the %d allowed", len(data), MaxUntrustedSize)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	ctxName, kctx, err := currentContext(cfg)
	if err != nil {
		return nil, err
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok || cluster == nil {
		return nil, fmt.Errorf("context %q names cluster %q, which the kubeconfig does not have", ctxName, kctx.Cluster)
	}
	user := cfg.AuthInfos[kctx.AuthInfo]
	if user == nil {
		if kctx.AuthInfo != "" {
			return nil, fmt.Errorf("context %q names user %q, which the kubeconfig does not have", ctxName, kctx.AuthInfo)
		}
		user = &clientcmdapi.AuthInfo{}
	}
	server, err := checkCluster(fmt.Sprintf("clusters[%s].cluster", kctx.Cluster), cluster)
	if err != nil {
		return nil, err
	}
	if err := checkUser(fmt.Sprintf("users[%s].user", kctx.AuthInfo), user); err != nil {
		return nil, err
	}
	return &rest.Config{
		Host: server.String(),
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   cluster.InsecureSkipTLSVerify,
			ServerName: cluster.TLSServerName,
			CAData:     cluster.CertificateAuthorityData,
			CertData:   user.ClientCertificateData,
			KeyData:    user.ClientKeyData,
		},
		BearerToken: user.Token,
		// Bodies as sent, no larger than MaxResponse: Go's transport would
		// decompress a gzip response without a limit.
		DisableCompression: true,
		WrapTransport:      limitResponses,
		// Not the hub's environment's proxy either: the address policy must see
		// the address the server's name resolves to.
		Proxy: noProxy,
	}, nil
}

// MaxResponse bounds each response body read from a server an untrusted kubeconfig
// names (discovery and OpenAPI documents of large clusters are a few megabytes).
const MaxResponse = 64 << 20

func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

func limitResponses(rt http.RoundTripper) http.RoundTripper { return limitedTransport{rt} }

// limitedTransport fails a response whose body is larger than MaxResponse.
type limitedTransport struct{ next http.RoundTripper }

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: MaxResponse, url: req.URL.Redacted()}
	return resp, nil
}

type limitedBody struct {
	io.ReadCloser
	left int64
	url  string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("the response of %s is larger than %d bytes", b.url, MaxResponse)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("the response of %s is larger than %d bytes", b.url, MaxResponse)
	}
	return n, err
}

// currentContext is the kubeconfig's current context, or its only one.
func currentContext(cfg *clientcmdapi.Config) (string, *clientcmdapi.Context, error) {
	name := cfg.CurrentContext
	if name == "" {
		if len(cfg.Contexts) != 1 {
			return "", nil, fmt.Errorf("the kubeconfig has no current-context and %d contexts: set current-context", len(cfg.Contexts))
		}
		for n := range cfg.Contexts {
			name = n
		}
	}
	kctx := cfg.Contexts[name]
	if kctx == nil {
		return "", nil, fmt.Errorf("current-context %q is not among the kubeconfig's contexts", name)
	}
	return name, kctx, nil
}

// checkCluster checks the cluster entry and returns its server URL.
func checkCluster(at string, c *clientcmdapi.Cluster) (*url.URL, error) {
	if c.CertificateAuthority != "" {
		return nil, &UnsafeError{at + ".certificate-authority", "it is a file path on the hub; give the CA as certificate-authority-data"}
	}
	if c.ProxyURL != "" {
		return nil, &UnsafeError{at + ".proxy-url", "the hub does not send a cluster's traffic through a proxy a kubeconfig names"}
	}
	if c.Server == "" {
		return nil, errors.New(at + ".server is empty")
	}
	u, err := url.Parse(c.Server)
	if err != nil {
		return nil, fmt.Errorf("%s.server %q is not a URL: %v", at, c.Server, err)
	}
	if u.Scheme != "https" {
		return nil, &UnsafeError{at + ".server", fmt.Sprintf("%q is not an https URL; the hub sends credentials only over TLS", c.Server)}
	}
	if u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%s.server %q needs a host and no user information", at, c.Server)
	}
	return u, nil
}

func checkUser(at string, u *clientcmdapi.AuthInfo) error {
	var refused []string
	why := map[string]string{}
	refuse := func(field, reason string) {
		refused = append(refused, field)
		why[field] = reason
	}
	if u.Exec != nil {
		refuse("exec", "it runs a program on the hub; give a token or client certificate data instead")
	}
	if u.AuthProvider != nil {
		refuse("auth-provider", "auth provider plugins run code and read files on the hub; give a token or client certificate data instead")
	}
	if u.TokenFile != "" {
		refuse("tokenFile", "it is a file path on the hub; give the token itself as token")
	}
	if u.ClientCertificate != "" {
		refuse("client-certificate", "it is a file path on the hub; give client-certificate-data")
	}
	if u.ClientKey != "" {
		refuse("client-key", "it is a file path on the hub; give client-key-data")
	}
	if u.Username != "" || u.Password != "" {
		refuse("username", "basic authentication is not supported; give a token or client certificate data")
	}
	if u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0 {
		refuse("as", "impersonation is not supported; give the credentials of the identity itself")
	}
	if len(refused) == 0 {
		return nil
	}
	sort.Strings(refused)
	fields := make([]string, len(refused))
	for i, f := range refused {
		fields[i] = at + "." + f
	}
	return &UnsafeError{strings.Join(fields, ", "), why[refused[0]]}
}
