package hubctl

import (
	"bufio"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/signing"
)

// GenerateSigningKey writes a new signing key to privatePath (mode 0600, refusing to
// replace a file) and its public half to privatePath.pub, and says where they are.
func GenerateSigningKey(privatePath string, out io.Writer) error {
	private, public, err := signing.GenerateKey()
	if err != nil {
		return err
	}
	publicPath := privatePath + ".pub"
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{privatePath, private, 0o600}, {publicPath, public, 0o644}} {
		file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return fmt.Errorf("writing the key: %w", err)
		}
		if _, err := file.Write(f.data); err != nil {
			file.Close()
			return err
		}
		if err := file.Close(); err != nil {
			return err
		}
	}
	key, err := signing.ParsePrivateKey(private)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Private key %s (keep it secret), public key %s (%s).\n"+
		"Agents trust it when installed with --set-file trustedKeys=%s\n", privatePath, publicPath, signing.Fingerprint(key.Public().(ed25519.PublicKey)), publicPath)
	return err
}

// SignBundles reads Bundles (YAML or JSON, several separated by ---) from in, signs
// each with the key in keyPath and writes them to out as YAML, ready for kubectl apply.
// A signature holds for one workspace: namespace, when set, is each Bundle's, which
// must not name another.
func SignBundles(keyPath, namespace string, in io.Reader, out io.Writer) error {
	pemData, err := os.ReadFile(keyPath)
	if err != nil {
		return err
	}
	key, err := signing.ParsePrivateKey(pemData)
	if err != nil {
		return fmt.Errorf("%s: %w", keyPath, err)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(in), 4096)
	for n := 0; ; n++ {
		var bundle fleet.Bundle
		err := decoder.Decode(&bundle)
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return errors.New("no Bundle in the input")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", n+1, err)
		}
		if bundle.Kind != "Bundle" || bundle.APIVersion != fleet.SchemeGroupVersion.String() {
			return fmt.Errorf("document %d is a %s %s, not a %s Bundle", n+1, bundle.APIVersion, bundle.Kind, fleet.SchemeGroupVersion)
		}
		switch {
		case namespace == "" && bundle.Namespace == "":
			return fmt.Errorf("Bundle %s has no metadata.namespace: give its workspace with --namespace", bundle.Name)
		case namespace != "" && bundle.Namespace != "" && bundle.Namespace != namespace:
			return fmt.Errorf("Bundle %s is in namespace %s, not %s", bundle.Name, bundle.Namespace, namespace)
		case namespace != "":
			bundle.Namespace = namespace
		}
		if err := signing.Sign(&bundle, nil, key); err != nil {
			return err
		}
		raw, err := manifest(&bundle)
		if err != nil {
			return err
		}
		if n > 0 {
			if _, err := io.WriteString(out, "---\n"); err != nil {
				return err
			}
		}
		if _, err := out.Write(raw); err != nil {
			return err
		}
	}
}

// manifest is bundle as YAML for kubectl apply: without its status or the empty
// fields the API server fills in.
func manifest(bundle *fleet.Bundle) ([]byte, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bundle)
	if err != nil {
		return nil, err
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return yaml.Marshal(obj)
}
