package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLS of the Postgres wire (docs/security.md, "TLS"): a certificate and key given as PEM
// files, or a self-signed pair generated once in the data directory for trying it out.

// selfSignedValidity is how long a generated certificate is valid; an expired one is made
// again at start.
const selfSignedValidity = 365 * 24 * time.Hour

// loadTLS returns the server's TLS configuration from PEM files.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// SelfSignedPaths are where the generated certificate and key of a data directory live.
func SelfSignedPaths(dataDir string) (cert, key string) {
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	dir := filepath.Join(dataDir, "tls")
	return filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
}

// ensureSelfSigned makes a self-signed certificate (ECDSA P-256) for localhost, the
// loopback addresses, this machine's name and host (the listen address's host, when it
// names one), unless a valid one is already there. It reports whether it made one.
func ensureSelfSigned(dataDir, host string) (certFile, keyFile string, made bool, err error) {
	certFile, keyFile = SelfSignedPaths(dataDir)
	if data, err := os.ReadFile(certFile); err == nil {
		if b, _ := pem.Decode(data); b != nil {
			if c, err := x509.ParseCertificate(b.Bytes); err == nil && time.Now().Add(24*time.Hour).Before(c.NotAfter) {
				if _, err := os.Stat(keyFile); err == nil {
					return certFile, keyFile, false, nil
				}
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", "", false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", false, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return "", "", false, err
	}
	names := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		names = append(names, h)
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsUnspecified() && !ip.IsLoopback() {
			ips = append(ips, ip)
		}
	} else if host != "" && host != "localhost" {
		names = append(names, host)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "rsql self-signed", Organization: []string{"rsql"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // its own issuer: clients trust it with sslrootcert
		DNSNames:              names,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", false, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return "", "", false, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", false, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", false, err
	}
	return certFile, keyFile, true, nil
}
