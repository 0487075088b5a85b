package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rancher/wrangler/v3/pkg/yaml"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla/flotilla/pkg/hubctl"
)

// envs are the environments tests/test.sh renders each example for.
var envs = []string{"dev", "test", "prod"}

// bookkeeping is the prefix of the labels and annotations Fleet's agent adds to
// every object it deploys (its object set's ID and hash); Flotilla's agent does not
// add them, so they are left out of the comparison.
const bookkeeping = "objectset.rio.cattle.io/"

// TestHubTestRendersWhatFleetRenders renders every example for every environment as
// tests/test.sh does with Fleet (`test` in the example's folder, with -l env=ENV for
// multi-cluster examples) and compares the objects with Fleet's.
func TestHubTestRendersWhatFleetRenders(t *testing.T) {
	repo := newChartRepository(t)
	for _, ex := range examples(t) {
		for _, env := range envs {
			t.Run(ex.Case+"/"+env, func(t *testing.T) {
				dir := localExample(t, ex.Case, repo)
				t.Chdir(dir)
				opts := hubctl.TestOptions{}
				if ex.MultiCluster {
					opts.ClusterLabels = map[string]string{"env": env}
				}
				var out bytes.Buffer
				if err := hubctl.Test(context.Background(), opts, &out, io.Discard); err != nil {
					t.Fatal(err)
				}
				want, err := os.ReadFile(filepath.Join(examplesDir, "tests/expected", ex.Case, env+"-output.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				got, wanted := objects(t, out.Bytes()), objects(t, want)
				for _, d := range differences("objects", got, wanted, 20) {
					t.Error(d)
				}
			})
		}
	}
}

// objects are the objects of a YAML stream keyed by apiVersion, kind, namespace and
// name (order is not compared), without Fleet's bookkeeping.
func objects(t *testing.T, data []byte) map[string]interface{} {
	t.Helper()
	objs, err := yaml.ToObjects(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]interface{}{}
	for _, obj := range objs {
		u := obj.(*unstructured.Unstructured)
		for _, field := range []string{"labels", "annotations"} {
			m, _, _ := unstructured.NestedStringMap(u.Object, "metadata", field)
			for k := range m {
				if strings.HasPrefix(k, bookkeeping) {
					delete(m, k)
				}
			}
			if len(m) == 0 {
				unstructured.RemoveNestedField(u.Object, "metadata", field)
			} else {
				_ = unstructured.SetNestedStringMap(u.Object, m, "metadata", field)
			}
		}
		key := fmt.Sprintf("%s/%s/%s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
		if _, dup := out[key]; dup {
			t.Fatalf("%s twice", key)
		}
		out[key] = u.Object
	}
	return out
}

func keys(m map[string]interface{}) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
