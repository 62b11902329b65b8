package test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// WebSockets with faye-websocket over rack.hijack (test/apps/faye.ru and
// examples/chat), talked to by a real client (coder/websocket) or by hand
// where a client must misbehave.

func startFaye(t *testing.T, workers int) (*server, string) {
	adminPort := freePort(t)
	args := []string{"--admin-port", adminPort}
	if workers > 0 {
		args = append(args, "-w", strconv.Itoa(workers))
	}
	return start(t, append(args, app("faye.ru"))...), "http://127.0.0.1:" + adminPort
}

func wsCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// wsDial opens a WebSocket to url (ws://...) that takes messages up to 4 MiB.
func wsDial(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	c, res, err := websocket.Dial(wsCtx(t), url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", url, err, res)
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return c
}

type wsMessage struct {
	typ  websocket.MessageType
	data []byte
}

// echoMessages are what the echo tests send: text and binary, small and
// 1 MiB, with every byte value in the binary ones.
func echoMessages() []wsMessage {
	rnd := rand.New(rand.NewSource(1))
	big := make([]byte, 1<<20)
	rnd.Read(big)
	letters := make([]byte, 1<<20)
	for i := range letters {
		letters[i] = 'a' + byte(rnd.Intn(26))
	}
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return []wsMessage{
		{websocket.MessageText, []byte("hello")},
		{websocket.MessageText, []byte("héllo, wörld ✓")},
		{websocket.MessageBinary, all},
		{websocket.MessageText, letters},
		{websocket.MessageBinary, big},
		{websocket.MessageText, []byte("")},
	}
}

// echoAll sends each message and checks it comes back byte for byte, as
// the same type.
func echoAll(t testing.TB, c *websocket.Conn, msgs []wsMessage) {
	t.Helper()
	ctx := wsCtx(t)
	for i, m := range msgs {
		if err := c.Write(ctx, m.typ, m.data); err != nil {
			t.Fatalf("message %d: write: %v", i, err)
		}
		typ, got, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("message %d (%d bytes): read: %v", i, len(m.data), err)
		}
		if typ != m.typ || !bytes.Equal(got, m.data) {
			t.Fatalf("message %d: sent %v of %d bytes, got %v of %d bytes (equal: %v)",
				i, m.typ, len(m.data), typ, len(got), bytes.Equal(got, m.data))
		}
	}
}

// Text and binary messages, 0 bytes to 1 MiB, come back byte for byte,
// from one client and from 10 at once; closing cleanly is seen by the app
// (code 1000) and the gauge of hijacked connections returns to 0.
func TestWebSocketEcho(t *testing.T) {
	msgs := echoMessages()
	inProcessAndWorkers(t, func(t *testing.T, workers int) {
		s, admin := startFaye(t, workers)
		url := "ws://" + s.addr + "/echo"
		c := wsDial(t, url)
		eventually(t, 10*time.Second, "the gauge counts the WebSocket", func() bool {
			return metricValue(t, admin, "ruvoy_hijacked_connections") == "1"
		})
		echoAll(t, c, msgs)
		if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
			t.Fatalf("close: %v", err)
		}
		var wg sync.WaitGroup
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t := inGoroutine(t)
				c, res, err := websocket.Dial(wsCtx(t), url, nil)
				if err != nil {
					// Whose refusal: the app's (faye.ru says why) or the server's.
					var body []byte
					if res != nil {
						body, _ = io.ReadAll(res.Body)
					}
					t.Errorf("%v: %q", err, body)
					return
				}
				c.SetReadLimit(4 << 20)
				defer c.CloseNow()
				echoAll(t, c, msgs[:4])
				if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
		}
		wg.Wait()
		eventually(t, 10*time.Second, "no hijacked connection left", func() bool {
			return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
		})
		eventually(t, 10*time.Second, "the app saw 11 clean closes", func() bool {
			return s.appStats(t)["close.1000"] == 11
		})
		st := s.appStats(t)
		equal(t, "opened", st["open"], 11)
		equal(t, "messages", st["messages"], len(msgs)+10*4)
	})
}

// Puma serves the same config.ru, in the same RACK_ENV: the 101 is the
// same, byte for byte, and the same messages come back the same from both.
func TestWebSocketEchoPuma(t *testing.T) {
	s := start(t, "-e", pumaEnv, app("faye.ru"))
	reference := strings.TrimPrefix(puma(t, "apps", "faye.ru", nil), "http://")
	heads := map[string]string{}
	for name, addr := range map[string]string{"ruvoy": s.addr, "Puma": reference} {
		c, head := rawUpgradeHead(t, addr)
		c.Close()
		heads[name] = head
		ws := wsDial(t, "ws://"+addr+"/echo")
		echoAll(t, ws, echoMessages())
		if err := ws.Close(websocket.StatusNormalClosure, ""); err != nil {
			t.Fatalf("%s: close: %v", name, err)
		}
	}
	equal(t, "the 101, ruvoy against Puma", heads["ruvoy"], heads["Puma"])
}

// The chat example: what one client says reaches all three, its own
// sender included; a client that leaves is announced to the others.
func TestWebSocketChat(t *testing.T) {
	s := start(t, "../examples/chat/config.ru")
	res := s.get(t, "/")
	equal(t, "page", res.status, 200)
	mustContain(t, "page", res.body, "new WebSocket(")
	var clients []*websocket.Conn
	for i := 0; i < 3; i++ {
		clients = append(clients, wsDial(t, "ws://"+s.addr+"/"))
	}
	ctx := wsCtx(t)
	// Each hears of the third joining: then all three are on the list.
	for i, c := range clients {
		readUntil(t, ctx, c, fmt.Sprintf("client %d", i), "* 3 connected")
	}
	for i, c := range clients {
		if err := c.Write(ctx, websocket.MessageText, []byte(fmt.Sprintf("hello from %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range clients {
		got := map[string]bool{}
		for len(got) < 3 {
			_, b, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("client %d: %v after %v", i, err, got)
			}
			got[string(b)] = true
		}
		for j := range clients {
			if !got[fmt.Sprintf("hello from %d", j)] {
				t.Fatalf("client %d got %v: not what %d said", i, got, j)
			}
		}
	}
	if err := clients[2].Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	readUntil(t, ctx, clients[0], "client 0", "* 2 connected")
	readUntil(t, ctx, clients[1], "client 1", "* 2 connected")
}

func readUntil(t testing.TB, ctx context.Context, c *websocket.Conn, who, want string) {
	t.Helper()
	var seen []string
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("%s: waiting for %q: %v (got %q)", who, want, err, seen)
		}
		if string(b) == want {
			return
		}
		seen = append(seen, string(b))
	}
}

const wsKey = "dGhlIHNhbXBsZSBub25jZQ==" // RFC 6455's example, and its accept value:
const wsAccept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

// rawUpgrade opens a WebSocket by hand and returns the connection after
// the 101.
func rawUpgrade(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, _ := rawUpgradeHead(t, addr)
	return c
}

// rawUpgradeHead is rawUpgrade, and the 101's head as it came.
func rawUpgradeHead(t testing.TB, addr string) (net.Conn, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(60 * time.Second))
	fmt.Fprintf(c, "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", wsKey)
	// Read the head byte by byte: nothing after it is ours to consume.
	var head []byte
	one := make([]byte, 1)
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		if _, err := c.Read(one); err != nil {
			t.Fatalf("reading the 101: %v (got %q)", err, head)
		}
		head = append(head, one[0])
	}
	mustContain(t, "head", string(head), "HTTP/1.1 101 ")
	mustContain(t, "head", string(head), "Sec-WebSocket-Accept: "+wsAccept)
	return c, string(head)
}

// Clients that vanish (a reset) in the middle of a frame: the others'
// echoes go on, the app sees every connection close, the gauge returns to
// 0 and the server still answers.
func TestWebSocketVanishingClients(t *testing.T) {
	inProcessAndWorkers(t, func(t *testing.T, workers int) {
		s, admin := startFaye(t, workers)
		url := "ws://" + s.addr + "/echo"
		staying := []*websocket.Conn{wsDial(t, url), wsDial(t, url)}
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := rawUpgrade(inGoroutine(t), s.addr)
				// A masked binary frame announcing 100 bytes; 10 of them come.
				frame := []byte{0x82, 0x80 | 100, 1, 2, 3, 4}
				c.Write(append(frame, bytes.Repeat([]byte{'x'}, 10)...))
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}()
		}
		wg.Wait()
		for _, c := range staying {
			echoAll(t, c, []wsMessage{{websocket.MessageText, []byte("still here")}})
		}
		eventually(t, 20*time.Second, "the app saw the 20 vanish", func() bool {
			return s.appStats(t)["closed"] == 20
		})
		eventually(t, 10*time.Second, "the gauge counts the two left", func() bool {
			return metricValue(t, admin, "ruvoy_hijacked_connections") == "2"
		})
		for _, c := range staying {
			echoAll(t, c, []wsMessage{{websocket.MessageBinary, []byte{0, 1, 2}}})
			if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 10*time.Second, "no hijacked connection left", func() bool {
			return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
		})
		st := s.appStats(t)
		equal(t, "opened", st["open"], 22)
		equal(t, "clean closes", st["close.1000"], 2)
		equal(t, "still serving", s.get(t, "/nope").status, 404)
	})
}

// Upgrades the app refuses are ordinary HTTP answers on a connection that
// goes on: a wrong path (404), no Sec-WebSocket-Key or another version
// (400), and a plain GET of the WebSocket's path (426). Nothing is
// hijacked.
func TestWebSocketRefused(t *testing.T) {
	s, admin := startFaye(t, 0)
	upgrade := "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	cases := []struct {
		request string
		status  int
		body    string
	}{
		{"GET /nope HTTP/1.1\r\nHost: x\r\n" + upgrade + "Sec-WebSocket-Key: " + wsKey + "\r\nSec-WebSocket-Version: 13\r\n\r\n", 404, "not found\n"},
		{"GET /echo HTTP/1.1\r\nHost: x\r\n" + upgrade + "Sec-WebSocket-Version: 13\r\n\r\n", 400, "a WebSocket needs Sec-WebSocket-Version 13 and a Sec-WebSocket-Key\n"},
		{"GET /echo HTTP/1.1\r\nHost: x\r\n" + upgrade + "Sec-WebSocket-Key: " + wsKey + "\r\nSec-WebSocket-Version: 8\r\n\r\n", 400, "a WebSocket needs Sec-WebSocket-Version 13 and a Sec-WebSocket-Key\n"},
		{"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", 426, "/echo is a WebSocket\n"},
	}
	// All on one connection, pipelined, then one more request.
	c := dial(t, s.addr)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	var all strings.Builder
	for _, k := range cases {
		all.WriteString(k.request)
	}
	all.WriteString("GET /stats HTTP/1.1\r\nHost: x\r\n\r\n")
	io.WriteString(c, all.String())
	r := bufio.NewReader(c)
	for _, k := range cases {
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		equal(t, k.request+"status", res.StatusCode, k.status)
		equal(t, k.request+"body", string(b), k.body)
	}
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	equal(t, "stats after the refusals", string(b), `{"refused":2}`)
	equal(t, "nothing hijacked", metricValue(t, admin, "ruvoy_hijacked_connections"), "0")
}

// Pings are answered both ways (a pong with the ping's payload); a close the server
// starts reaches the client with its code and reason; a close the client
// starts is answered, and the app sees its code.
func TestWebSocketPingAndClose(t *testing.T) {
	s, admin := startFaye(t, 0)
	url := "ws://" + s.addr + "/echo"
	ctx := wsCtx(t)

	c := wsDial(t, url)
	readErr := make(chan error, 1)
	go func() {
		// Reads run the pings' pongs; the only message is the close.
		_, _, err := c.Read(ctx)
		readErr <- err
	}()
	for i := 0; i < 3; i++ {
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := c.Ping(pctx)
		cancel()
		if err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
	}
	if err := c.Write(ctx, websocket.MessageText, []byte("close-me")); err != nil {
		t.Fatal(err)
	}
	err := <-readErr
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("after close-me: %v, not a close", err)
	}
	equal(t, "close code", ce.Code, websocket.StatusCode(4000))
	equal(t, "close reason", ce.Reason, "asked to")

	c = wsDial(t, url)
	echoAll(t, c, []wsMessage{{websocket.MessageText, []byte("bye")}})
	// The client answers the server's ping as it reads.
	if err := c.Write(ctx, websocket.MessageText, []byte("ping-me")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := c.Read(ctx); err != nil || string(b) != "pong seen" {
		t.Fatalf("after the server's ping: %q, %v", b, err)
	}
	if err := c.Close(websocket.StatusGoingAway, "leaving"); err != nil {
		t.Fatalf("the client's close was not answered: %v", err)
	}
	eventually(t, 10*time.Second, "the app saw both closes", func() bool {
		st := s.appStats(t)
		return st["close.4000"] == 1 && st["close.1001"] == 1
	})
	eventually(t, 10*time.Second, "no hijacked connection left", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
	})
}

// Over TLS (wss://) the same messages come back the same: Go keeps the
// TLS state and pumps plaintext to faye.
func TestWebSocketTLS(t *testing.T) {
	certs := makeCerts(t)
	s := start(t, "--tls-cert", certs.serverCert, "--tls-key", certs.serverKey, app("faye.ru"))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: certs.pool, ServerName: "localhost", NextProtos: []string{"http/1.1"},
	}}}
	c, res, err := websocket.Dial(wsCtx(t), "wss://"+s.addr+"/echo", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, res)
	}
	defer c.CloseNow()
	c.SetReadLimit(4 << 20)
	echoAll(t, c, echoMessages())
	if err := c.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatalf("close: %v", err)
	}
}
