package controlplane

import (
	"net"
	"os"
	"testing"

	"k8s.io/kubernetes/cmd/kubeadm/app/util/pkiutil"
)

func TestPKIIsCreatedOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	sans := servingSANs(net.ParseIP("127.0.0.1"), nil)
	first, err := ensurePKI(dir, sans)
	if err != nil {
		t.Fatal(err)
	}
	saKey, err := os.ReadFile(first.keyFile(serviceAccountKey))
	if err != nil {
		t.Fatal(err)
	}
	servingBefore, _ := os.ReadFile(first.certFile(servingName))

	second, err := ensurePKI(dir, sans)
	if err != nil {
		t.Fatal(err)
	}
	if !second.caCert.Equal(first.caCert) {
		t.Fatal("the CA was replaced on the second start")
	}
	if again, _ := os.ReadFile(second.keyFile(serviceAccountKey)); string(again) != string(saKey) {
		t.Fatal("the ServiceAccount signing key was replaced on the second start")
	}
	if again, _ := os.ReadFile(second.certFile(servingName)); string(again) != string(servingBefore) {
		t.Fatal("the serving certificate was reissued although nothing changed")
	}

	// A new SAN reissues the serving certificate from the same CA.
	third, err := ensurePKI(dir, servingSANs(net.ParseIP("127.0.0.1"), []string{"hub.example.com", "192.0.2.10"}))
	if err != nil {
		t.Fatal(err)
	}
	serving, err := pkiutil.TryLoadCertFromDisk(dir, servingName)
	if err != nil {
		t.Fatal(err)
	}
	if err := serving.CheckSignatureFrom(third.caCert); err != nil {
		t.Fatalf("serving certificate not signed by the CA: %v", err)
	}
	if err := serving.VerifyHostname("hub.example.com"); err != nil {
		t.Fatal(err)
	}
	if err := serving.VerifyHostname("192.0.2.10"); err != nil {
		t.Fatal(err)
	}
	admin, err := pkiutil.TryLoadCertFromDisk(dir, adminName)
	if err != nil {
		t.Fatal(err)
	}
	if len(admin.Subject.Organization) != 1 || admin.Subject.Organization[0] != "system:masters" {
		t.Fatalf("admin certificate groups %v", admin.Subject.Organization)
	}
}
