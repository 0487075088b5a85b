package imports

import (
	"errors"
	"fmt"
	"testing"
)

func TestFailureReason(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"success", nil, ""},
		{"an import error", fail(ReasonUnreachable, "dial tcp: refused"), ReasonUnreachable},
		{"a wrapped import error", fmt.Errorf("deploying: %w", fail(ReasonUnsafeKubeconfig, "exec plugin")), ReasonUnsafeKubeconfig},
		{"waiting for the token's values", fail(ReasonWaitingForToken, "no values yet"), ReasonWaitingForToken},
		{"any other error is Helm's", errors.New("rendering chart: boom"), ReasonHelmFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := failureReason(c.err); got != c.want {
				t.Errorf("failureReason(%v) = %q, want %q", c.err, got, c.want)
			}
		})
	}
}
