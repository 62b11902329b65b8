package ruvoy

/*
#include "ruvoy.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// UpstreamCall is a call an app made through env["ruvoy.upstream"].
type UpstreamCall struct {
	Cluster, Method, Path string
	Header                http.Header
	Body                  []byte
	Origin                *http.Request // the request the app is serving
}

// UpstreamResponse is a cluster's answer, buffered whole.
type UpstreamResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// UpstreamError is a call that could not be made; the app gets it as
// Ruvoy::UpstreamError with this message.
type UpstreamError struct{ Msg string }

func (e *UpstreamError) Error() string { return e.Msg }

// Upstream makes calls to named clusters. It returns an answer made while
// the call was under way (504 for a timeout, 503 when the cluster could not
// be reached) as a response, and an *UpstreamError when the call could not
// be made at all. An answer over maxBytes is an error too.
type Upstream interface {
	Call(ctx context.Context, c *UpstreamCall, maxBytes int64) (*UpstreamResponse, error)
}

// UpstreamOptions turn on env["ruvoy.upstream"] for an app.
type UpstreamOptions struct {
	Clusters         []string // the clusters the app may call
	Timeout          time.Duration
	MaxResponseBytes int64
	Upstream         Upstream
}

const (
	defaultUpstreamTimeout  = 15 * time.Second
	defaultUpstreamMaxBytes = 1 << 20
)

// upstream runs one call the VM asked for and sends it the outcome. The
// call ends with the request: when it finished first, or its client left,
// the call is cancelled.
func (a *App) upstream(st *stream, origin *http.Request, id, call uint64, payload []byte) {
	o := a.opts.Upstream
	// On HTTP/1 the request's context also ends on a client's half-close
	// (see App.serve): the call ends with the handler instead (detach).
	base := origin.Context()
	if origin.ProtoMajor == 1 {
		base = context.WithoutCancel(base)
	}
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	if !st.addCall(id, call, cancel) {
		return
	}
	defer st.removeCall(call)
	defer func() {
		if p := recover(); p != nil {
			a.rt.log().Error("ruvoy: panic in an upstream call", zap.Any("panic", p), zap.Stack("stack"))
			a.reply(id, call, nil, &UpstreamError{"the upstream call failed inside the server"})
		}
	}()

	c, timeout, ok := decodeCall(payload)
	if !ok {
		a.reply(id, call, nil, &UpstreamError{"malformed upstream call"})
		return
	}
	c.Origin = origin
	if o.Timeout > 0 && (timeout == 0 || timeout > o.Timeout) {
		timeout = o.Timeout
	}
	callCtx, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	res, err := o.Upstream.Call(callCtx, c, o.MaxResponseBytes)
	switch {
	case errors.Is(context.Cause(ctx), errCallerStopped):
		return // nobody waits for the answer
	case ctx.Err() != nil:
		err = &UpstreamError{"the request finished before the upstream call did"}
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) || callCtx.Err() == context.DeadlineExceeded:
		res, err = &UpstreamResponse{Status: http.StatusGatewayTimeout, Header: http.Header{}}, nil
	}
	a.reply(id, call, res, err)
}

// Why an upstream call is cancelled.
var (
	errCallerStopped = errors.New("ruvoy: the caller stopped waiting for the upstream call")
	errRequestOver   = errors.New("ruvoy: the request finished before the upstream call did")
)

func (a *App) reply(id, call uint64, res *UpstreamResponse, err error) {
	if err != nil {
		var ue *UpstreamError
		if !errors.As(err, &ue) {
			ue = &UpstreamError{err.Error()}
		}
		submit(C.RV_IN_UPSTREAM_REPLY, id, C.RV_F_FAILED, call, []byte(ue.Msg))
		return
	}
	b := make([]byte, 0, 256+len(res.Body))
	b = binary.NativeEndian.AppendUint16(b, uint16(res.Status))
	countAt := len(b)
	b = append(b, 0, 0)
	n := 0
	for name, values := range res.Header {
		for _, v := range values {
			if n == 0xffff {
				break
			}
			b = putString(b, name)
			b = putString(b, v)
			n++
		}
	}
	binary.NativeEndian.PutUint16(b[countAt:], uint16(n))
	b = append(b, res.Body...)
	submit(C.RV_IN_UPSTREAM_REPLY, id, 0, call, b)
}

// decodeCall reads an RV_OUT_UPSTREAM payload (rv_upstream.c).
func decodeCall(p []byte) (*UpstreamCall, time.Duration, bool) {
	if len(p) < 4 {
		return nil, 0, false
	}
	timeout := time.Duration(binary.NativeEndian.Uint32(p)) * time.Millisecond
	p = p[4:]
	var fields [3]string
	for i := range fields {
		s, rest, ok := takeString(p)
		if !ok {
			return nil, 0, false
		}
		fields[i], p = s, rest
	}
	if len(p) < 2 {
		return nil, 0, false
	}
	count := int(binary.NativeEndian.Uint16(p))
	p = p[2:]
	h := http.Header{}
	for i := 0; i < count; i++ {
		name, rest, ok := takeString(p)
		if !ok {
			return nil, 0, false
		}
		value, rest, ok := takeString(rest)
		if !ok {
			return nil, 0, false
		}
		h.Add(name, value)
		p = rest
	}
	return &UpstreamCall{Cluster: fields[0], Method: fields[1], Path: fields[2], Header: h, Body: p}, timeout, true
}

func takeString(p []byte) (string, []byte, bool) {
	if len(p) < 4 {
		return "", nil, false
	}
	n := int(binary.NativeEndian.Uint32(p))
	if len(p) < 4+n {
		return "", nil, false
	}
	return string(p[4 : 4+n]), p[4+n:], true
}
