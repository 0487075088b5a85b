package conformance

import (
	"context"
	"io"
	"testing"

	"github.com/flotilla/flotilla/pkg/hubctl"
)

// TestHubApplyMakesTheBundlesFleetMakes applies every example of fleet-examples as
// tests/test.sh does with Fleet (`apply -n WORKSPACE -o - test`, COMMIT=fake, in the
// example's folder) and compares each Bundle with Fleet's.
func TestHubApplyMakesTheBundlesFleetMakes(t *testing.T) {
	repo := newChartRepository(t)
	for _, ex := range examples(t) {
		t.Run(ex.Case, func(t *testing.T) {
			dir := localExample(t, ex.Case, repo)
			t.Chdir(dir)
			opts := hubctl.ApplyOptions{Name: "test", Namespace: ex.Namespace, Log: io.Discard}
			opts.Read.Labels = map[string]string{hubctl.CommitLabel: "fake"}
			got, err := hubctl.ReadBundles(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			want := expectedBundles(t, ex.Case)
			if len(got) != len(want) {
				t.Fatalf("%d Bundles, Fleet made %d", len(got), len(want))
			}
			for i := range want {
				diffs := differences(want[i].Name, comparable(t, got[i], repo), comparable(t, want[i], nil), 20)
				for _, d := range diffs {
					t.Error(d)
				}
			}
		})
	}
}
