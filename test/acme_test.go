package test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --domain NAME gets NAME's certificate from Let's Encrypt by ACME. Here
// the public internet is out of reach, so the test makes a network
// namespace (root) whose /etc/hosts (ip netns exec's /etc/netns/NAME)
// sends Let's Encrypt's name to a stand-in on loopback: a second ruvoy
// serving Caddy's own ACME server (acme_server, its local CA) at
// https://acme-v02.api.letsencrypt.org/directory, trusted through
// SSL_CERT_FILE; the app's name resolves to loopback too, for the
// challenge. Then `ruvoy --domain app.test` does what it does for a
// public name, unchanged: it asks the directory it always asks, answers
// the challenge on :80 or :443, serves the app over HTTPS on :443 with the
// certificate it got, redirects http:// there, and serves no other name.
const acmeNS = "rvd-acme"

func TestCertsDomainACME(t *testing.T) {
	needRoot(t, "the ACME test makes a network namespace, with ports 80 and 443 and a hosts file of its own")
	removeACMENet()
	t.Cleanup(removeACMENet)
	ipRun(t, "netns", "add", acmeNS)
	ipRun(t, "-n", acmeNS, "link", "set", "lo", "up")
	if err := os.MkdirAll(filepath.Join("/etc/netns", acmeNS), 0o755); err != nil {
		t.Fatal(err)
	}
	hosts := "127.0.0.1 localhost app.test\n127.0.0.2 acme-v02.api.letsencrypt.org acme-staging-v02.api.letsencrypt.org\n"
	if err := os.WriteFile(filepath.Join("/etc/netns", acmeNS, "hosts"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	inNS := func(args ...string) *exec.Cmd {
		return exec.Command("ip", append([]string{"netns", "exec", acmeNS}, args...)...)
	}

	// The stand-in: Let's Encrypt's directory path is /directory; Caddy's
	// ACME server serves its CA's under /acme/local/.
	caData := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true, "config": map[string]any{"persist": false}},
		"apps": map[string]any{
			"http": map[string]any{"servers": map[string]any{"acme": map[string]any{
				"listen":                  []string{"127.0.0.2:443"},
				"automatic_https":         map[string]any{"disable_redirects": true},
				"tls_connection_policies": []any{map[string]any{}},
				"routes": []any{
					map[string]any{
						"match":  []any{map[string]any{"path": []string{"/directory"}}},
						"handle": []any{map[string]any{"handler": "rewrite", "uri": "/acme/local/directory"}},
					},
					map[string]any{"handle": []any{map[string]any{"handler": "acme_server"}}},
				},
			}}},
			"tls": map[string]any{
				"certificates": map[string]any{"automate": []string{"acme-v02.api.letsencrypt.org"}},
				"automation": map[string]any{"policies": []any{map[string]any{
					"subjects": []string{"acme-v02.api.letsencrypt.org"},
					"issuers":  []any{map[string]any{"module": "internal"}},
				}}},
			},
			"pki": map[string]any{"certificate_authorities": map[string]any{"local": map[string]any{"install_trust": false}}},
		},
	})
	cfgFile := filepath.Join(caData, "acme.json")
	os.WriteFile(cfgFile, cfg, 0o644)
	dataEnv := func(dir string) []string { return []string{"XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir} }
	launchCmd(t, inNS(binary(t), "run", "--config", cfgFile), "", dataEnv(caData), "acme-v02.api.letsencrypt.org:443 in "+acmeNS)
	root := filepath.Join(caData, "caddy", "pki", "authorities", "local", "root.crt")
	curl := func(args ...string) string {
		out, err := inNS(append([]string{"curl", "-sS", "--max-time", "10", "--cacert", root}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("%v: %s", err, out)
		}
		return string(out)
	}
	eventually(t, 30*time.Second, "the ACME stand-in's directory", func() bool {
		return strings.Contains(curl("https://acme-v02.api.letsencrypt.org/directory"), `"newOrder"`)
	})

	appData := t.TempDir()
	rackup, _ := filepath.Abs(app("core.ru"))
	// -a 127.0.0.1: the stand-in has 127.0.0.2:443, which 0.0.0.0:443
	// would overlap (ruvoy refuses a port in use).
	s := launchCmd(t, inNS(binary(t), "--domain", "app.test", "-a", "127.0.0.1", rackup), "",
		append(dataEnv(appData), "SSL_CERT_FILE="+root), "app.test:443 in "+acmeNS)
	var got string
	eventually(t, 60*time.Second, "https://app.test/ served with a certificate the stand-in issued", func() bool {
		got = curl("https://app.test/raw/hello")
		return got == "hello world"
	})
	mustContain(t, "the banner", s.stdout.String(), "on https://app.test")

	// What Caddy stored: a certificate for app.test from the directory
	// --domain names, issued by the stand-in's CA.
	stored, _ := filepath.Glob(filepath.Join(appData, "caddy", "certificates", "*", "app.test", "app.test.crt"))
	if len(stored) != 1 || filepath.Base(filepath.Dir(filepath.Dir(stored[0]))) != "acme-v02.api.letsencrypt.org-directory" {
		t.Fatalf("the certificates stored: %v, want one from acme-v02.api.letsencrypt.org-directory", stored)
	}
	verifyChain(t, stored[0], root, "app.test")

	// http:// is redirected to https://; another name gets no app.
	redirect := curl("-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "http://app.test/raw/hello")
	equal(t, "http://app.test/raw/hello", redirect, "308 https://app.test/raw/hello")
	other := curl("-o", "/dev/null", "-w", "%{http_code}", "--resolve", "other.test:443:127.0.0.1", "-k", "https://other.test/raw/hello")
	if other == "200" {
		t.Errorf("another name was served the app: %s", other)
	}
}

// verifyChain checks that the PEM chain in file, leaf first, is valid for
// name under the root in rootFile.
func verifyChain(t *testing.T, file, rootFile, name string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var certs []*x509.Certificate
	for block, rest := pem.Decode(b); block != nil; block, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	rootPEM, err := os.ReadFile(rootFile)
	if err != nil {
		t.Fatal(err)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	if len(certs) == 0 {
		t.Fatalf("%s holds no certificate", file)
	}
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter}); err != nil {
		t.Fatalf("the certificate for %s: %v (issuer %s)", name, err, certs[0].Issuer)
	}
}

// removeACMENet kills what runs in the ACME test's namespace and removes
// it and its hosts file.
func removeACMENet() {
	killNamespace(acmeNS)
	exec.Command("ip", "netns", "delete", acmeNS).Run()
	os.RemoveAll(filepath.Join("/etc/netns", acmeNS))
}
