package registration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// checks are the names of the checks that found problems.
func checks(problems []Problem) string {
	var names []string
	for _, p := range problems {
		names = append(names, p.Check)
	}
	return strings.Join(names, ",")
}

func TestPreflightClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		skew time.Duration
		want string
	}{
		{"in step", 0, ""},
		{"a little ahead", 30 * time.Second, ""},
		{"at the limit behind", -maxPreflightSkew, ""},
		{"far ahead", time.Hour, "1h0m0s ahead of"},
		{"far behind", -2 * time.Minute, "2m0s behind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &preflight{}
			p.clock(tc.skew)
			switch {
			case tc.want == "" && len(p.problems) != 0:
				t.Fatalf("problems %v, want none", p.problems)
			case tc.want != "" && (len(p.problems) != 1 || p.problems[0].Check != "clock" || !strings.Contains(p.problems[0].Message, tc.want)):
				t.Fatalf("problems %v, want a clock problem saying %q", p.problems, tc.want)
			}
		})
	}
}

// selfSignedCA is the PEM of a CA that signed nothing.
func selfSignedCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// closedAddress is a local address nothing listens on.
func closedAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestPreflightHub(t *testing.T) {
	hubNow := time.Now()
	hub := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Date", hubNow.UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer hub.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hub.Certificate().Raw})
	otherCA := selfSignedCA(t)

	for _, tc := range []struct {
		name     string
		url      string
		ca       []byte
		proxy    HubProxy
		now      time.Time
		want     string
		answered bool
	}{
		{name: "all well (a 401 is an answer)", url: hub.URL, ca: ca, now: hubNow, answered: true},
		{name: "another CA", url: hub.URL, ca: otherCA, now: hubNow, want: "ca"},
		{name: "the system's roots", url: hub.URL, now: hubNow, want: "ca"},
		{name: "nothing at the address", url: "https://" + closedAddress(t), ca: ca, now: hubNow, want: "reachable"},
		{name: "a proxy nothing listens at", url: "https://hub.example.com:6443", ca: ca, proxy: HubProxy{URL: "http://" + closedAddress(t)}, now: hubNow, want: "proxy"},
		{name: "a clock an hour ahead", url: hub.URL, ca: ca, now: hubNow.Add(time.Hour), want: "clock", answered: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &preflight{d: Downstream{HubProxy: tc.proxy}, now: func() time.Time { return tc.now }}
			answered := p.hub(context.Background(), tc.url, tc.ca)
			if got := checks(p.problems); got != tc.want || answered != tc.answered {
				t.Fatalf("problems %v, answered %v; want %q, answered %v", p.problems, answered, tc.want, tc.answered)
			}
		})
	}
}

// TestPreflightHubThroughAProxyThatRefuses: a proxy that answers CONNECT with 403.
func TestPreflightHubThroughAProxyThatRefuses(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer proxy.Close()
	p := &preflight{d: Downstream{HubProxy: HubProxy{URL: proxy.URL}}, now: time.Now}
	if p.hub(context.Background(), "https://hub.example.com:6443", nil) || checks(p.problems) != "proxy" ||
		!strings.Contains(p.problems[0].Message, "not reachable through the proxy") {
		t.Fatalf("problems %v", p.problems)
	}
}

func TestPreflightDownstreamRights(t *testing.T) {
	for _, tc := range []struct {
		name   string
		denied func(*authorizationv1.ResourceAttributes) bool
		want   string
	}{
		{"cluster-admin", func(*authorizationv1.ResourceAttributes) bool { return false }, ""},
		{"no rights beyond its namespace", func(a *authorizationv1.ResourceAttributes) bool { return a.Namespace == "" }, "rbac"},
		{"cannot store its identity", func(a *authorizationv1.ResourceAttributes) bool { return a.Verb == "update" }, "rbac"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			client.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
				review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
				review.Status.Allowed = !tc.denied(review.Spec.ResourceAttributes)
				return true, review, nil
			})
			p := &preflight{d: Downstream{Client: client, Namespace: "cattle-fleet-system"}, now: time.Now}
			p.downstreamRights(context.Background())
			if got := checks(p.problems); got != tc.want {
				t.Fatalf("problems %v, want %q", p.problems, tc.want)
			}
		})
	}
}

func TestPreflightWithoutValuesOrIdentity(t *testing.T) {
	client := fake.NewSimpleClientset()
	client.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		review.Status.Allowed = true
		return true, review, nil
	})
	problems := Preflight(context.Background(), Downstream{Client: client, Namespace: "cattle-fleet-system"})
	if checks(problems) != "config" || !strings.HasPrefix(problems[0].String(), "PREFLIGHT config: there is neither a bootstrap Secret") {
		t.Fatalf("problems %v", problems)
	}
}
