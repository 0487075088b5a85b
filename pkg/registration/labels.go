package registration

import "strings"

// reservedLabelDomains are label prefixes only the hub may set: an agent claiming
// them could move its cluster into bundles or groups meant for others.
var reservedLabelDomains = []string{"fleet.cattle.io/", "management.cattle.io/"}

// SanitizeLabels returns the labels an agent asked for, without reserved keys (and
// their subdomains, such as "x.fleet.cattle.io/").
func SanitizeLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for key, value := range labels {
		if reserved(key) {
			continue
		}
		out[key] = value
	}
	return out
}

func reserved(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, domain := range reservedLabelDomains {
		d := strings.TrimSuffix(domain, "/")
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}
