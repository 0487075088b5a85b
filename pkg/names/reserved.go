package names

import "strings"

// reservedLabelDomains are label prefixes only the hub may set.
var reservedLabelDomains = []string{"fleet.cattle.io", "management.cattle.io"}

// Reserved says whether a label key is in a domain only the hub may set
// (fleet.cattle.io/, management.cattle.io/ and their subdomains, such as
// x.fleet.cattle.io/): neither an agent's labels nor a Bundle's carry such keys
// into what the hub makes.
func Reserved(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	prefix = strings.ToLower(prefix)
	for _, d := range reservedLabelDomains {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}
