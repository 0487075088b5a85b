package names

import (
	"crypto/md5" //nolint:gosec // Fleet's names use MD5 as a checksum, not for security.
	"encoding/hex"
	"path"
	"regexp"
	"strings"
)

// Names that must be exactly what Fleet derives, so that a folder applied with
// Flotilla and with Fleet's own CLI gives the same Bundle: Fleet hashes with MD5
// where the rest of this package uses SHA-256.

// MaxReleaseName is the longest Helm release name, and so the longest Bundle name a
// folder gives.
const MaxReleaseName = 53

var (
	notInReleaseName = regexp.MustCompile(`[^a-zA-Z0-9-]+`)
	dashes           = regexp.MustCompile(`-+`)
	dnsLabel         = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// BundleForPath is the name of the Bundle that `fleet apply NAME` (and `hub apply
// NAME`) makes of the folder at dir, relative to where it runs: FleetReleaseName of
// NAME and the folder joined, "." being NAME alone.
func BundleForPath(name, dir string) string {
	return FleetReleaseName(path.Join(name, dir))
}

// FleetReleaseName turns s into a Helm release name (a DNS label of at most
// MaxReleaseName characters) as Fleet does: slashes become dashes; a name that had
// upper-case or other characters a label cannot hold gets a checksum appended
// before it is cleaned, so that names differing only there stay apart; a long name
// is shortened with a checksum; one that cleans to nothing is a checksum.
func FleetReleaseName(s string) string {
	original := s
	s = strings.ReplaceAll(s, "/", "-")
	if s != strings.ToLower(s) || notInReleaseName.MatchString(s) {
		s += "-" + md5Hex(s, 8)
	}
	s = strings.ToLower(s)
	s = notInReleaseName.ReplaceAllLiteralString(s, "-")
	s = dashes.ReplaceAllString(s, "-")
	s = strings.Trim(s, "-")
	if !dnsLabel.MatchString(s) {
		return md5Hex(original, 24)
	}
	return fleetLimit(s, MaxReleaseName)
}

// fleetLimit shortens s to at most max characters as Fleet does: the first
// max-6, a dash (left out when the cut already ends in one) and 5 hex digits of the
// checksum of s.
func fleetLimit(s string, max int) string {
	const hashLen = 5
	if len(s) <= max {
		return s
	}
	keep := max - hashLen - 1
	sep := "-"
	if s[keep-1] == '-' {
		sep = ""
	}
	return s[:keep] + sep + md5Hex(s, hashLen)
}

func md5Hex(s string, n int) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec // a checksum, as Fleet's
	return hex.EncodeToString(sum[:])[:n]
}
