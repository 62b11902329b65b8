package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// caddyConfig is ruvoy's own generated config for the launch (listener,
// protocols, TLS, timeouts, logging) with the ruvoy handler replaced by
// handler: Caddy under the very server config ruvoy runs with.
func caddyConfig(l launch, handler map[string]any) *exec.Cmd {
	bin := filepath.Join(l.root, "ruvoy")
	args := []string{"--print-config", "-e", "production", "-p", l.port}
	if l.tls {
		args = append(args, "--tls-cert", l.cert, "--tls-key", l.key)
	}
	out, err := exec.Command(bin, append(args, l.rackup)...).Output()
	check(err)
	var cfg map[string]any
	check(json.Unmarshal(out, &cfg))
	srv := cfg["apps"].(map[string]any)["http"].(map[string]any)["servers"].(map[string]any)["ruvoy"].(map[string]any)
	srv["routes"] = []any{map[string]any{"handle": []any{handler}}}
	file := filepath.Join(l.out, fmt.Sprintf("caddy-%s-%s.json", handler["handler"], l.port))
	b, _ := json.MarshalIndent(cfg, "", "  ")
	check(os.WriteFile(file, b, 0o644))
	return exec.Command(bin, "run", "--config", file)
}

// nginxConfig proxies to Puma on the backend port the way a production
// nginx would: keep-alive upstream connections, HTTP/1.1 to the backend,
// HTTP/2 and TLS 1.3 to clients when serving TLS.
func nginxConfig(l launch) *exec.Cmd {
	dir := filepath.Join(l.out, "nginx-"+l.port)
	check(os.MkdirAll(dir, 0o755))
	listen := "listen 127.0.0.1:" + l.port + ";"
	if l.tls {
		listen = fmt.Sprintf("listen 127.0.0.1:%s ssl http2;\n    ssl_certificate %s;\n    ssl_certificate_key %s;\n    ssl_protocols TLSv1.3;",
			l.port, l.cert, l.key)
	}
	conf := fmt.Sprintf(`daemon off;
user root;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  client_max_body_size 16m;
  upstream puma { server 127.0.0.1:%[2]s; keepalive 64; }
  server {
    %[3]s
    location / {
      proxy_pass http://puma;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $remote_addr;
    }
  }
}
`, dir, l.backend, listen)
	file := filepath.Join(dir, "nginx.conf")
	check(os.WriteFile(file, []byte(conf), 0o644))
	return exec.Command("nginx", "-c", file, "-e", filepath.Join(dir, "error.log"))
}
