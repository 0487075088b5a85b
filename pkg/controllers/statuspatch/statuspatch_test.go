package statuspatch

import "testing"

type status struct {
	Ready   bool     `json:"ready,omitempty"`
	Message string   `json:"message,omitempty"`
	Nodes   []string `json:"nodes,omitempty"`
}

func TestForHoldsOnlyWhatChanged(t *testing.T) {
	for name, c := range map[string]struct {
		before, after status
		want          string
	}{
		"unchanged":     {status{Ready: true}, status{Ready: true}, ""},
		"one field":     {status{Ready: true, Message: "a"}, status{Ready: true, Message: "b"}, `{"status":{"message":"b"}}`},
		"removed field": {status{Ready: true, Message: "a"}, status{Ready: true}, `{"status":{"message":null}}`},
		"list replaced": {status{Nodes: []string{"a"}}, status{Nodes: []string{"a", "b"}}, `{"status":{"nodes":["a","b"]}}`},
	} {
		got, err := For(c.before, c.after)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != c.want {
			t.Errorf("%s: patch %s, want %s", name, got, c.want)
		}
	}
}
