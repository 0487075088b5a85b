// Package signing lets a Bundle's author sign what it deploys and an agent refuse
// what that author did not sign.
//
// A signature covers the Bundle's workspace and name and the deployment IDs its targets can give a
// cluster: each is the Content's name (the SHA-256 of the resources) and the SHA-256
// of the options a target merges (values, namespaces, release name, ...). The agent
// recomputes its BundleDeployment's ID from the options it is about to use and the
// Content it reads (whose checksum is checked against its name), so neither the
// resources nor the options can change between the author and the agent: not on the
// hub, not by a person who may write Bundles, not in transit.
package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
	"github.com/flotilla/flotilla/pkg/target"
)

// Signature is the value of the Bundle annotation names.SignatureAnnotation, which
// the hub copies to the Bundle's BundleDeployments.
type Signature struct {
	// Key is the fingerprint of the public key that verifies it.
	Key string `json:"key"`
	// Deployments are the deployment IDs signed, sorted.
	Deployments []string `json:"deployments"`
	// Value is the base64 Ed25519 signature of payload(bundle, Deployments).
	Value string `json:"signature"`
}

// payloadDomain keeps these signatures from being taken for any other Ed25519
// signature made with the same key.
const payloadDomain = "flotilla bundle signature v1\n"

// payload is what is signed: the Bundle, by workspace and name, and its deployments.
func payload(namespace, name string, deployments []string) []byte {
	return []byte(payloadDomain + namespace + "/" + name + "\n" + strings.Join(deployments, "\n"))
}

// Deployments are the deployment IDs bundle's targets can give a cluster, sorted and
// without repeats. Resources are read inline, or from contents (the Content a
// spec.contentsId names) when given.
func Deployments(bundle *fleet.Bundle, contents *fleet.Content) ([]string, error) {
	var contentName string
	switch {
	case bundle.Spec.ContentsID == "":
		encoded, err := content.Encode(bundle.Spec.Resources)
		if err != nil {
			return nil, err
		}
		contentName = encoded.Name
	case contents == nil || contents.Name != bundle.Spec.ContentsID:
		return nil, fmt.Errorf("the Bundle's resources are in the Content %s: sign it where that Content can be read", bundle.Spec.ContentsID)
	default:
		if _, err := content.Resources(contents, content.DefaultMaxSize); err != nil {
			return nil, err
		}
		contentName = contents.Name
	}
	var out []string
	for _, t := range bundle.Spec.Targets {
		if t.DoNotDeploy {
			continue
		}
		id, err := target.DeploymentID(contentName, target.Merge(bundle.Spec.BundleDeploymentOptions, t.BundleDeploymentOptions))
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		return nil, errors.New("the Bundle has no target that deploys: there is nothing to sign")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Sign signs bundle with key, setting its signature annotation. Sign again after any
// change to its resources, options or targets' options.
func Sign(bundle *fleet.Bundle, contents *fleet.Content, key ed25519.PrivateKey) error {
	if bundle.Namespace == "" {
		return fmt.Errorf("signing Bundle %s: no namespace: a signature holds for one workspace", bundle.Name)
	}
	deployments, err := Deployments(bundle, contents)
	if err != nil {
		return fmt.Errorf("signing Bundle %s: %w", bundle.Name, err)
	}
	sig := Signature{
		Key:         Fingerprint(key.Public().(ed25519.PublicKey)),
		Deployments: deployments,
		Value:       base64.StdEncoding.EncodeToString(ed25519.Sign(key, payload(bundle.Namespace, bundle.Name, deployments))),
	}
	raw, err := json.Marshal(sig)
	if err != nil {
		return err
	}
	if len(raw) > MaxSignatureSize {
		return fmt.Errorf("signing Bundle %s: its %d deployments make a signature longer than the %d bytes agents read", bundle.Name, len(deployments), MaxSignatureSize)
	}
	if bundle.Annotations == nil {
		bundle.Annotations = map[string]string{}
	}
	bundle.Annotations[names.SignatureAnnotation] = string(raw)
	return nil
}

// Fingerprint names a public key as signatures and logs do: "SHA256:" and the
// unpadded base64 of the SHA-256 of its DER, as agent keys are named.
func Fingerprint(key ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		panic(err) // an Ed25519 key always marshals
	}
	return registration.Fingerprint(base64.StdEncoding.EncodeToString(der))
}

// GenerateKey makes a signing key: its private half as PKCS #8 PEM (what
// `openssl genpkey -algorithm ed25519` writes) and its public half as PKIX PEM.
func GenerateKey() (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	public, err = PublicKeyPEM(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), public, nil
}

// PublicKeyPEM is key as PKIX PEM.
func PublicKeyPEM(key ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePrivateKey reads an Ed25519 private key in PKCS #8 PEM.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM \"PRIVATE KEY\" (make one with `hub bundle keygen` or `openssl genpkey -algorithm ed25519`)")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an Ed25519 key", key)
	}
	return priv, nil
}
