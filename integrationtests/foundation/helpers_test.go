package foundation

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// writeChart writes a minimal Helm chart with one ConfigMap into dir.
func writeChart(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: demo\nversion: 0.1.0\nkubeVersion: \">=1.30.0-0\"\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  hello: world\n",
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
