package controlplane

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestPodSecurityConfig(t *testing.T) {
	for _, tc := range []struct {
		level string
		ok    bool
	}{
		{"privileged", true}, {"baseline", true}, {"restricted", true}, {"", false}, {"Baseline", false}, {"root", false},
	} {
		t.Run(tc.level, func(t *testing.T) {
			data, err := podSecurityConfig(tc.level)
			if (err == nil) != tc.ok {
				t.Fatalf("podSecurityConfig(%q) = %v, want ok=%v", tc.level, err, tc.ok)
			}
			if !tc.ok {
				return
			}
			var cfg struct {
				Plugins []struct {
					Name          string
					Configuration struct {
						Defaults   map[string]string
						Exemptions struct{ Namespaces []string }
					}
				}
			}
			if err := yaml.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			if len(cfg.Plugins) != 1 || cfg.Plugins[0].Name != "PodSecurity" {
				t.Fatalf("plugins %+v", cfg.Plugins)
			}
			c := cfg.Plugins[0].Configuration
			if c.Defaults["enforce"] != tc.level || c.Defaults["warn"] != "restricted" || c.Defaults["audit"] != "restricted" {
				t.Errorf("defaults %v, want enforce %s and warn, audit restricted", c.Defaults, tc.level)
			}
			if strings.Join(c.Exemptions.Namespaces, ",") != "kube-system" {
				t.Errorf("exempt namespaces %v, want kube-system", c.Exemptions.Namespaces)
			}
		})
	}
}
