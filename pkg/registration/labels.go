package registration

import "github.com/flotilla/flotilla/pkg/names"

// SanitizeLabels returns the labels an agent asked for, without reserved keys (see
// names.Reserved): an agent claiming them could move its cluster into bundles or
// groups meant for others.
func SanitizeLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for key, value := range labels {
		if names.Reserved(key) {
			continue
		}
		out[key] = value
	}
	return out
}
