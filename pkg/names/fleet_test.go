package names

import (
	"strings"
	"testing"
)

// The expected names were computed apart from this code (MD5 sums from Python's
// hashlib), following Fleet's rules for Bundle names.
func TestBundleForPath(t *testing.T) {
	long := "test-" + strings.Repeat("a", 60)
	cutAtDash := "test-" + strings.Repeat("a", 41) + "-" + strings.Repeat("b", 20)
	for _, tc := range []struct {
		name, in, dir, want string
	}{
		{"the folder applied", "test", ".", "test"},
		{"a subfolder", "single-cluster", "helm", "single-cluster-helm"},
		{"upper case gets a checksum", "Test", "Dir", "test-dir-6d6752bd"},
		{"a character a label cannot hold", "single-cluster", "helm_chart", "single-cluster-helm-chart-d6816f95"},
		{"too long: cut with a checksum", long, ".", "test-" + strings.Repeat("a", 42) + "-96756"},
		{"cut where a dash is: no second dash", cutAtDash, ".", "test-" + strings.Repeat("a", 41) + "-de2c7"},
		{"only characters a label cannot hold", "!!!", ".", "6dd07555"},
		{"nothing at all", "", "", "d41d8cd98f00b204e9800998"},
		// Examples Fleet publishes for its own names.
		{"Fleet: a character replaced", "long-name-test-shortpath-with@char", "", "long-name-test-shortpath-with-char-031bab5e"},
		{"Fleet: dots, spaces and upper case", "long-name-test-0.App_ ", "", "long-name-test-0-app-5bf6b3fb"},
		{"Fleet: a domain name", "bundle.name.example.com", "", "bundle-name-example-com-645ef821"},
		{"Fleet: 54 characters", strings.Repeat("1234567890", 5) + "123a", "", "12345678901234567890123456789012345678901234567-fdba4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := BundleForPath(tc.in, tc.dir)
			if got != tc.want {
				t.Fatalf("BundleForPath(%q, %q) = %q, want %q", tc.in, tc.dir, got, tc.want)
			}
			if len(got) > MaxReleaseName {
				t.Fatalf("%q is longer than %d", got, MaxReleaseName)
			}
		})
	}
}
