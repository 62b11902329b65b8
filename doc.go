// Package ruvoy serves Ruby web applications (Rails, Sinatra, any
// config.ru) from a CRuby VM embedded in Caddy. This file holds no code:
// the command is cmd/ruvoy, the Caddy modules are in caddy/, and the
// runtime is under internal/ (docs/architecture.md, "The layout"):
//
//	internal/serve    the request path: admission, streams, bodies, responses
//	internal/host     the process's one VM: boot, control, dispatcher, stop
//	internal/cluster  cluster mode: the front end's pools and a worker's main
//	internal/vm       the only cgo: the VM thread's C sources
package ruvoy
