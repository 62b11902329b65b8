package serve

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ruvoy/ruvoy/internal/wire"

	"go.uber.org/zap"
)

// UpstreamCall is a call an app made through env["ruvoy.upstream"].
type UpstreamCall struct {
	Upstream, Method, Path string // the upstream's name, and the request
	Header                 http.Header
	Body                   []byte
	Origin                 *http.Request // the request the app is serving
}

// UpstreamResponse is an upstream's answer, buffered whole.
type UpstreamResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// UpstreamError is a call that could not be made; the app gets it as
// Ruvoy::UpstreamError with this message.
type UpstreamError struct{ Msg string }

func (e *UpstreamError) Error() string { return e.Msg }

// An UpstreamCaller makes calls to named upstreams. It returns an answer
// made while the call was under way (504 for a timeout, 503 when the
// upstream could not be reached) as a response, and an *UpstreamError
// when the call could not be made at all. An answer over maxBytes is an
// error too.
type UpstreamCaller interface {
	Call(ctx context.Context, c *UpstreamCall, maxBytes int64) (*UpstreamResponse, error)
}

// UpstreamOptions turn on env["ruvoy.upstream"] for an app.
type UpstreamOptions struct {
	Names            []string // the upstreams the app may call
	Timeout          time.Duration
	MaxResponseBytes int64
	Caller           UpstreamCaller
}

const (
	defaultUpstreamTimeout  = 15 * time.Second
	defaultUpstreamMaxBytes = 1 << 20
)

// upstreamCall is one call the VM asked for: the request it came from
// (its stream, the VM it runs in, its id), the call's number, and the
// call itself as the VM wrote it.
type upstreamCall struct {
	st      *stream
	link    vmLink
	origin  *http.Request
	id      uint64
	call    uint64
	payload []byte
}

// upstream runs one call the VM asked for and sends it the outcome. The
// call ends with the request: when it finished first, or its client left,
// the call is cancelled.
func (a *App) upstream(u upstreamCall) {
	o := a.opts.Upstream
	st, l, origin, id, call := u.st, u.link, u.origin, u.id, u.call
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
			replyUpstream(l, id, call, nil, &UpstreamError{"the upstream call failed inside the server"})
		}
	}()

	c, timeout, ok := decodeCall(u.payload)
	if !ok {
		replyUpstream(l, id, call, nil, &UpstreamError{"malformed upstream call"})
		return
	}
	c.Origin = origin
	if o.Timeout > 0 && (timeout == 0 || timeout > o.Timeout) {
		timeout = o.Timeout
	}
	callCtx, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	res, err := o.Caller.Call(callCtx, c, o.MaxResponseBytes)
	switch {
	case errors.Is(context.Cause(ctx), errCallerStopped):
		return // nobody waits for the answer
	case ctx.Err() != nil:
		err = &UpstreamError{"the request finished before the upstream call did"}
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) || callCtx.Err() == context.DeadlineExceeded:
		res, err = &UpstreamResponse{Status: http.StatusGatewayTimeout, Header: http.Header{}}, nil
	}
	replyUpstream(l, id, call, res, err)
}

// Why an upstream call is cancelled.
var (
	errCallerStopped = errors.New("ruvoy: the caller stopped waiting for the upstream call")
	errRequestOver   = errors.New("ruvoy: the request finished before the upstream call did")
)

func replyUpstream(l vmLink, id, call uint64, res *UpstreamResponse, err error) {
	if err != nil {
		var ue *UpstreamError
		if !errors.As(err, &ue) {
			ue = &UpstreamError{err.Error()}
		}
		l.Submit(wire.InUpstreamReply, id, wire.FlagFailed, call, []byte(ue.Msg))
		return
	}
	b := wire.AppendUpstreamReply(make([]byte, 0, 256+len(res.Body)), res.Status, res.Header, res.Body)
	l.Submit(wire.InUpstreamReply, id, 0, call, b)
}

// decodeCall reads a wire.OutUpstream payload.
func decodeCall(p []byte) (*UpstreamCall, time.Duration, bool) {
	c, ok := wire.ReadUpstreamCall(p)
	if !ok {
		return nil, 0, false
	}
	return &UpstreamCall{Upstream: c.Upstream, Method: c.Method, Path: c.Path, Header: c.Header, Body: c.Body},
		time.Duration(c.TimeoutMS) * time.Millisecond, true
}
