package controlplane

import (
	"crypto"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pkiutil"
)

const (
	caName = "ca"
	// identityCAName signs nothing but cluster identities' client certificates; the
	// API server trusts it for client certificates only (clientCAName).
	identityCAName = "identity-ca"
	// clientCAName is the bundle of both CAs the API server trusts client
	// certificates from.
	clientCAName      = "client-ca"
	servingName       = "apiserver"
	adminName         = "admin"
	hubName           = "hub"
	controllerMgrName = "controller-manager"
	serviceAccountKey = "sa"
	// HubUsername is the user the embedded hub's controllers act as.
	HubUsername          = "flotilla-hub"
	caValidity           = 10 * 365 * 24 * time.Hour
	leafValidity         = 365 * 24 * time.Hour
	renewBefore          = 30 * 24 * time.Hour
	keyAlgorithm         = kubeadmapi.EncryptionAlgorithmECDSAP256
	serviceClusterIPCIDR = "10.43.0.0/16"
	// kubernetesServiceIP is the first address of serviceClusterIPCIDR, the
	// "kubernetes" Service that in-cluster clients reach.
	kubernetesServiceIP = "10.43.0.1"
)

// pki is the control plane's certificate authority and the certificates and keys
// derived from it, as files under one directory.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  crypto.Signer
	// identityCA is the CA of cluster identities.
	identityCA *x509.Certificate
}

// ensurePKI loads the CA under dir or creates it on first start, then makes sure the
// serving certificate covers sans, the client certificates are valid and the
// ServiceAccount signing key exists. The CA and the signing key are never replaced,
// so credentials issued before a restart keep working.
func ensurePKI(dir string, sans certutil.AltNames) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	p := &pki{dir: dir}
	var err error
	if p.caCert, p.caKey, err = ensureCA(dir, caName, "flotilla-ca"); err != nil {
		return nil, err
	}
	if p.identityCA, _, err = ensureCA(dir, identityCAName, "flotilla-cluster-identity-ca"); err != nil {
		return nil, err
	}
	bundle := append(pkiutil.EncodeCertPEM(p.caCert), pkiutil.EncodeCertPEM(p.identityCA)...)
	if err := os.WriteFile(p.certFile(clientCAName), bundle, 0o600); err != nil {
		return nil, fmt.Errorf("writing the client CA bundle: %w", err)
	}

	leaves := []struct {
		name   string
		config certutil.Config
	}{
		{servingName, certutil.Config{
			CommonName: "kube-apiserver",
			AltNames:   sans,
			Usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		{adminName, certutil.Config{
			CommonName:   "flotilla-admin",
			Organization: []string{"system:masters"},
			Usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{hubName, certutil.Config{
			// The hub's controllers have their own name, not the admin's that people
			// use, so that admission policies can keep to the hub what only it may
			// write (HubUsername).
			CommonName:   HubUsername,
			Organization: []string{"system:masters"},
			Usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{controllerMgrName, certutil.Config{
			// The garbage collector and namespace controller act on every resource,
			// so the embedded controller manager runs as a cluster administrator.
			CommonName:   "system:kube-controller-manager",
			Organization: []string{"system:masters"},
			Usages:       []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	}
	for _, leaf := range leaves {
		if err := p.ensureLeaf(leaf.name, leaf.config); err != nil {
			return nil, err
		}
	}
	if err := p.ensureServiceAccountKey(); err != nil {
		return nil, err
	}
	return p, nil
}

// ensureCA loads the CA called name under dir, or creates it.
func ensureCA(dir, name, commonName string) (*x509.Certificate, crypto.Signer, error) {
	if pkiutil.CertOrKeyExist(dir, name) {
		cert, key, err := pkiutil.TryLoadCertAndKeyFromDisk(dir, name)
		if err != nil {
			return nil, nil, fmt.Errorf("loading the CA %s from %s: %w", name, dir, err)
		}
		return cert, key, nil
	}
	cert, key, err := pkiutil.NewCertificateAuthority(&pkiutil.CertConfig{
		Config:              certutil.Config{CommonName: commonName},
		NotAfter:            time.Now().Add(caValidity),
		EncryptionAlgorithm: keyAlgorithm,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the CA %s: %w", name, err)
	}
	if err := pkiutil.WriteCertAndKey(dir, name, cert, key); err != nil {
		return nil, nil, fmt.Errorf("writing the CA %s: %w", name, err)
	}
	return cert, key, nil
}

// ensureLeaf keeps the certificate called name if it was signed by this CA, is not
// about to expire and names every wanted SAN; otherwise it issues a new one.
func (p *pki) ensureLeaf(name string, config certutil.Config) error {
	if cert, _, err := pkiutil.TryLoadCertAndKeyFromDisk(p.dir, name); err == nil {
		if cert.CheckSignatureFrom(p.caCert) == nil &&
			cert.Subject.CommonName == config.CommonName &&
			time.Until(cert.NotAfter) > renewBefore &&
			coversSANs(cert, config.AltNames) {
			return nil
		}
	}
	cert, key, err := pkiutil.NewCertAndKey(p.caCert, p.caKey, &pkiutil.CertConfig{
		Config:              config,
		NotAfter:            time.Now().Add(leafValidity),
		EncryptionAlgorithm: keyAlgorithm,
	})
	if err != nil {
		return fmt.Errorf("issuing the %s certificate: %w", name, err)
	}
	if err := pkiutil.WriteCertAndKey(p.dir, name, cert, key); err != nil {
		return fmt.Errorf("writing the %s certificate: %w", name, err)
	}
	return nil
}

func coversSANs(cert *x509.Certificate, want certutil.AltNames) bool {
	for _, dns := range want.DNSNames {
		if !slices.Contains(cert.DNSNames, dns) {
			return false
		}
	}
	for _, ip := range want.IPs {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

func (p *pki) ensureServiceAccountKey() error {
	if _, err := os.Stat(p.path(serviceAccountKey + ".key")); err == nil {
		return nil
	}
	keyPEM, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return fmt.Errorf("creating the ServiceAccount signing key: %w", err)
	}
	if err := keyutil.WriteKey(p.path(serviceAccountKey+".key"), keyPEM); err != nil {
		return fmt.Errorf("writing the ServiceAccount signing key: %w", err)
	}
	return nil
}

func (p *pki) path(file string) string { return filepath.Join(p.dir, file) }

func (p *pki) certFile(name string) string { return p.path(name + ".crt") }

func (p *pki) keyFile(name string) string { return p.path(name + ".key") }

// caPEM returns the CA certificate as PEM, for kubeconfigs and agents.
func (p *pki) caPEM() []byte { return pkiutil.EncodeCertPEM(p.caCert) }

// clientCredential reads a client certificate and key issued by ensurePKI.
func (p *pki) clientCredential(name string) (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(p.certFile(name)); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = os.ReadFile(p.keyFile(name)); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// servingSANs are the names and addresses the API server certificate covers: the
// loopback names, the in-cluster "kubernetes" Service names, this host's name and
// addresses, and the extra ones the user asked for.
func servingSANs(bindAddress net.IP, extra []string) certutil.AltNames {
	sans := certutil.AltNames{
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPs: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP(kubernetesServiceIP)},
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		sans.DNSNames = append(sans.DNSNames, host)
	}
	if bindAddress != nil && !bindAddress.IsUnspecified() {
		sans.IPs = append(sans.IPs, bindAddress)
	} else if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, addr := range addrs {
			if ipNet, ok := addr.(*net.IPNet); ok && !ipNet.IP.IsLinkLocalUnicast() {
				sans.IPs = append(sans.IPs, ipNet.IP)
			}
		}
	}
	for _, san := range extra {
		if ip := net.ParseIP(san); ip != nil {
			sans.IPs = append(sans.IPs, ip)
		} else if san != "" {
			sans.DNSNames = append(sans.DNSNames, san)
		}
	}
	pkiutil.RemoveDuplicateAltNames(&sans)
	return sans
}
