package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// credentials are the files kube-apiserver serves and signs with, made fresh
// for every run.
type credentials struct {
	caPEM           []byte
	servingCertFile string
	servingKeyFile  string
	saKeyFile       string
	tokenFile       string
	token           string
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	return key, der, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", b), nil
}

// makeCredentials writes a CA, a serving certificate for 127.0.0.1 and localhost
// signed by it, a service-account signing key, and a static token file granting
// system:masters.
func makeCredentials(dir string) (*credentials, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, _, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "lockstep-testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * 365 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	servingKey, servingKeyDER, err := newKey()
	if err != nil {
		return nil, err
	}
	servingTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * 365 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTmpl, ca, &servingKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}

	_, saKeyDER, err := newKey()
	if err != nil {
		return nil, err
	}
	token, err := randomToken()
	if err != nil {
		return nil, err
	}

	c := &credentials{
		caPEM:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		servingCertFile: filepath.Join(dir, "serving.crt"),
		servingKeyFile:  filepath.Join(dir, "serving.key"),
		saKeyFile:       filepath.Join(dir, "service-account.key"),
		tokenFile:       filepath.Join(dir, "tokens.csv"),
		token:           token,
	}
	if err := writePEM(c.servingCertFile, "CERTIFICATE", servingDER); err != nil {
		return nil, err
	}
	if err := writePEM(c.servingKeyFile, "EC PRIVATE KEY", servingKeyDER); err != nil {
		return nil, err
	}
	if err := writePEM(c.saKeyFile, "EC PRIVATE KEY", saKeyDER); err != nil {
		return nil, err
	}
	line := fmt.Sprintf("%s,lockstep-admin,lockstep-admin,\"system:masters\"\n", token)
	if err := os.WriteFile(c.tokenFile, []byte(line), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}
