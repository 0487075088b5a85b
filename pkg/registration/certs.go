package registration

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/client-go/util/keyutil"

	"github.com/flotilla/flotilla/pkg/names"
)

// A cluster's identity on a hub that can sign client certificates is a pair of x509
// client certificates for the agent's own key, whose private half never leaves the
// downstream cluster: one for its work (names.ClusterUser of its per-cluster
// namespace), one that may only ask for the next identity (names.ClusterRecoveryUser).
// Both carry the key's fingerprint as a group (names.AgentKeyGroup), so the API
// server's identity authorizer refuses them once the Cluster is bound to another key
// or its namespace is gone.

// certBackdate is how far before its issue a certificate is valid, for an API server
// whose clock is a little behind the hub's.
const certBackdate = time.Minute

// IdentitySigner signs cluster identity certificates with a CA the hub's API server
// trusts for client certificates.
type IdentitySigner struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// NewIdentitySigner is a signer with the CA certificate and key given as PEM.
func NewIdentitySigner(certPEM, keyPEM []byte) (*IdentitySigner, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("the identity CA certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the identity CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("the identity CA certificate is not a CA's")
	}
	parsed, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the identity CA key: %w", err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("the identity CA key is a %T, which cannot sign", parsed)
	}
	return &IdentitySigner{cert: cert, key: key}, nil
}

// LoadIdentitySigner reads the CA certificate and key files.
func LoadIdentitySigner(certFile, keyFile string) (*IdentitySigner, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	return NewIdentitySigner(certPEM, keyPEM)
}

// Issue signs a client certificate for publicKey (base64 PKIX DER, as a request
// carries it) as the identity (or, with recovery, the recovery identity) of the
// cluster whose per-cluster namespace is namespace, valid for lifetime from now.
func (s *IdentitySigner) Issue(publicKey, namespace string, recovery bool, lifetime time.Duration, now time.Time) ([]byte, error) {
	der, err := base64.StdEncoding.DecodeString(publicKey)
	if err != nil {
		return nil, errors.New("publicKey is not base64")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("publicKey: %w", err)
	}
	if _, ok := pub.(ed25519.PublicKey); !ok {
		return nil, fmt.Errorf("publicKey is a %T, not an Ed25519 key", pub)
	}
	user := names.ClusterUser(namespace)
	if recovery {
		user = names.ClusterRecoveryUser(namespace)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   user,
			Organization: []string{names.ClustersGroup, names.AgentKeyGroup(Fingerprint(publicKey))},
		},
		NotBefore:             now.Add(-certBackdate).Truncate(time.Second),
		NotAfter:              now.Add(lifetime).Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	signed, err := x509.CreateCertificate(rand.Reader, template, s.cert, pub, s.key)
	if err != nil {
		return nil, fmt.Errorf("signing the identity certificate of %s: %w", namespace, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: signed}), nil
}

// parseCertificate reads one PEM certificate.
func parseCertificate(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// certificateFor checks that certPEM is a certificate for key's public half and
// returns it as TLS presents it.
func certificateFor(certPEM []byte, key AgentKey) (*tls.Certificate, *x509.Certificate, error) {
	cert, err := parseCertificate(certPEM)
	if err != nil {
		return nil, nil, err
	}
	pub, ok := cert.PublicKey.(ed25519.PublicKey)
	if !ok || !pub.Equal(key.private.Public()) {
		return nil, nil, errors.New("the certificate is not for the agent's key")
	}
	return &tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key.private, Leaf: cert}, cert, nil
}

// HubAuth authenticates an agent's requests to the hub as its cluster identity: with
// its client certificate, or on hubs that hand out ServiceAccount tokens, with its
// token. A renewed identity takes effect without rebuilding the clients.
type HubAuth struct {
	tokens *TokenSource
	key    AgentKey
	mu     sync.RWMutex
	cert   *tls.Certificate
	// dialer's connections are closed when the certificate changes: a TLS
	// connection keeps the certificate it was opened with.
	dialer *connrotation.Dialer
}

// NewHubAuth authenticates as cred, whose certificate (if it has one) is for key.
func NewHubAuth(cred Credential, key AgentKey) (*HubAuth, error) {
	a := &HubAuth{tokens: NewTokenSource(cred.Token), key: key,
		dialer: connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)}
	if len(cred.Certificate) > 0 {
		cert, _, err := certificateFor(cred.Certificate, key)
		if err != nil {
			return nil, fmt.Errorf("the cluster's identity certificate: %w", err)
		}
		a.cert = cert
	}
	return a, nil
}

// Set makes cred the identity of the requests that follow.
func (a *HubAuth) Set(cred Credential) error {
	if len(cred.Certificate) == 0 {
		a.tokens.Set(cred.Token)
		return nil
	}
	cert, _, err := certificateFor(cred.Certificate, a.key)
	if err != nil {
		return fmt.Errorf("the cluster's identity certificate: %w", err)
	}
	a.mu.Lock()
	a.cert = cert
	a.mu.Unlock()
	a.dialer.CloseAll()
	return nil
}

func (a *HubAuth) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.cert == nil {
		return &tls.Certificate{}, nil
	}
	return a.cert, nil
}

// ClientConfig is a client configuration for the hub as the cluster identity of c,
// authenticated by auth, through proxy.
func (c Credential) ClientConfig(auth *HubAuth, proxy HubProxy) (*rest.Config, error) {
	if len(c.Certificate) == 0 {
		return &rest.Config{
			Host:            c.APIServerURL,
			TLSClientConfig: rest.TLSClientConfig{CAData: c.APIServerCA},
			WrapTransport:   transport.TokenSourceWrapTransport(auth.tokens),
			Proxy:           proxy.Func(),
			UserAgent:       "flotilla-agent",
			Timeout:         30 * time.Second,
		}, nil
	}
	rt, err := auth.transport(c.APIServerCA, proxy)
	if err != nil {
		return nil, err
	}
	return &rest.Config{Host: c.APIServerURL, Transport: rt, UserAgent: "flotilla-agent", Timeout: 30 * time.Second}, nil
}

// transport is an HTTPS transport that trusts caPEM (the system's roots when empty)
// and presents the current certificate, through proxy.
func (a *HubAuth) transport(caPEM []byte, proxy HubProxy) (http.RoundTripper, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, GetClientCertificate: a.clientCertificate}
	if len(caPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("the hub's CA is not PEM")
		}
		tlsConfig.RootCAs = pool
	}
	return utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy.Func(),
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         a.dialer.DialContext,
	}), nil
}

// HubClient is a client configuration for the hub as cred, with the agent's key
// kept in d, and the HubAuth that renewals of cred are given to.
func (d Downstream) HubClient(ctx context.Context, cred Credential) (*rest.Config, *HubAuth, error) {
	var key AgentKey
	if cred.HasCertificate() {
		found := false
		var err error
		if key, found, err = d.existingKey(ctx); err != nil {
			return nil, nil, err
		} else if !found {
			return nil, nil, fmt.Errorf("the agent's key is gone from Secret %s/%s, so its identity certificate is of no use", d.Namespace, names.AgentIdentitySecret)
		}
	}
	return cred.clientFor(key, d.HubProxy)
}

// clientFor is a client configuration for the hub as c, whose certificate (if any)
// is for key, through proxy, and its HubAuth.
func (c Credential) clientFor(key AgentKey, proxy HubProxy) (*rest.Config, *HubAuth, error) {
	auth, err := NewHubAuth(c, key)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := c.ClientConfig(auth, proxy)
	if err != nil {
		return nil, nil, err
	}
	return cfg, auth, nil
}
