package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Action Cable (Rails 6.1 or 7.2) in the Rails example under ruvoy: WebSocket
// clients subscribe to RoomChannel at /cable, MessagesController
// broadcasts what is POSTed to /rooms/:room/messages.

// lobby is the identifier of a subscription to the room "lobby", as the
// client sends it; the server echoes it byte for byte.
const lobby = `{"channel":"RoomChannel","room":"lobby"}`

// A message whose JSON has something to escape: Active Support escapes
// <, > and & in JSON (escape_html_entities_in_json), quotes are escaped,
// UTF-8 goes as it is.
const (
	trickyBody = `héllo <b>"cable"</b> & ☃`
	trickyJSON = `"héllo \u003cb\u003e\"cable\"\u003c/b\u003e \u0026 ☃"`
)

// roomMessage is the frame a subscriber to room gets for a broadcast of
// body, whose JSON is bodyJSON.
func roomMessage(room, bodyJSON string) string {
	return `{"identifier":"{\"channel\":\"RoomChannel\",\"room\":\"` + room + `\"}","message":{"room":"` + room + `","body":` + bodyJSON + `}}`
}

// cableClient is one WebSocket connection to /cable.
type cableClient struct {
	t    testing.TB
	ws   *websocket.Conn
	tcp  *net.TCPConn // under ws, to reset it
	recv chan string  // text frames other than pings
}

// dialCable opens /cable with origin as Origin and reads the welcome.
func dialCable(t testing.TB, s *server, origin string) *cableClient {
	t.Helper()
	c, err := tryCable(s, origin)
	if err != nil {
		t.Fatalf("dialing /cable with Origin %s: %v", origin, err)
	}
	t.Cleanup(func() { c.ws.CloseNow() })
	c.t = t
	equal(t, "first frame", c.next(), `{"type":"welcome"}`)
	return c
}

func tryCable(s *server, origin string) (*cableClient, error) {
	c := &cableClient{recv: make(chan string, 100)}
	dialer := &net.Dialer{}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dialer.DialContext(ctx, network, addr)
		if err == nil {
			c.tcp = conn.(*net.TCPConn)
		}
		return conn, err
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, res, err := websocket.Dial(ctx, "ws://"+s.addr+"/cable", &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: transport},
		HTTPHeader: http.Header{"Origin": {origin}},
	})
	if err != nil {
		if res != nil {
			return nil, fmt.Errorf("%w (status %d)", err, res.StatusCode)
		}
		return nil, err
	}
	ws.SetReadLimit(1 << 20)
	c.ws = ws
	go c.read()
	return c, nil
}

// read passes on the frames that are not Action Cable's pings (every 3 s).
func (c *cableClient) read() {
	defer close(c.recv)
	for {
		typ, b, err := c.ws.Read(context.Background())
		if err != nil {
			return
		}
		if typ != websocket.MessageText {
			c.recv <- fmt.Sprintf("binary frame %q", b)
			continue
		}
		if strings.HasPrefix(string(b), `{"type":"ping",`) {
			continue
		}
		c.recv <- string(b)
	}
}

// next is the next frame; it fails the test after 30 s.
func (c *cableClient) next() string {
	c.t.Helper()
	select {
	case m, ok := <-c.recv:
		if !ok {
			c.t.Fatal("the cable connection closed")
		}
		return m
	case <-time.After(30 * time.Second):
		c.t.Fatal("no frame within 30s")
	}
	return ""
}

// quiet checks that no frame comes within d.
func (c *cableClient) quiet(d time.Duration) {
	c.t.Helper()
	select {
	case m := <-c.recv:
		c.t.Fatalf("unexpected frame %s", m)
	case <-time.After(d):
	}
}

func (c *cableClient) send(msg string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		c.t.Fatal(err)
	}
}

// expectAll reads len(want) frames and checks they are want in any
// order: Action Cable's worker pool (4 threads) may pass on broadcasts
// that come close together out of order.
func (c *cableClient) expectAll(want []string) {
	c.t.Helper()
	got := map[string]int{}
	for range want {
		got[c.next()]++
	}
	for _, w := range want {
		if got[w] == 0 {
			c.t.Fatalf("missing %s; got %v", w, got)
		}
		got[w]--
	}
}

// subscribe subscribes to identifier and waits for the confirmation.
func (c *cableClient) subscribe(identifier string) {
	c.t.Helper()
	c.send(`{"command":"subscribe","identifier":` + jsonString(identifier) + `}`)
	equal(c.t, "answer to subscribe", c.next(), `{"identifier":`+jsonString(identifier)+`,"type":"confirm_subscription"}`)
}

// workerPid asks ProbeChannel which process serves the connection.
func (c *cableClient) workerPid() string {
	c.t.Helper()
	const probe = `{"channel":"ProbeChannel"}`
	c.send(`{"command":"subscribe","identifier":` + jsonString(probe) + `}`)
	m := regexp.MustCompile(`^\{"identifier":"\{\\"channel\\":\\"ProbeChannel\\"\}","message":\{"pid":(\d+)\}\}$`).FindStringSubmatch(c.next())
	if m == nil {
		c.t.Fatal("ProbeChannel sent no pid")
	}
	equal(c.t, "answer to subscribe", c.next(), `{"identifier":`+jsonString(probe)+`,"type":"confirm_subscription"}`)
	return m[1]
}

// reset drops the connection with a TCP reset, as a vanished client.
func (c *cableClient) reset() {
	c.tcp.SetLinger(0)
	c.tcp.Close()
}

func (c *cableClient) close() {
	c.ws.Close(websocket.StatusNormalClosure, "")
}

// jsonString quotes s as JSON; the identifiers here need only quotes
// escaped.
func jsonString(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// poster POSTs messages as the room's page does: with the CSRF token of
// its session.
type poster struct {
	s      *server
	client *http.Client
	token  string
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)"`)

func newPoster(t testing.TB, s *server, room string) *poster {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	p := &poster{s: s, client: &http.Client{Jar: jar, Timeout: 60 * time.Second}}
	res, err := p.client.Get(s.url + "/rooms/" + room)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	equal(t, "GET /rooms/"+room, res.StatusCode, 200)
	m := csrfMeta.FindSubmatch(b)
	if m == nil {
		t.Fatalf("no CSRF token in the room's page:\n%s", b)
	}
	p.token = string(m[1])
	return p
}

// post broadcasts body to room and returns the status.
func (p *poster) post(t testing.TB, room, body string) int {
	t.Helper()
	res, err := p.client.PostForm(p.s.url+"/rooms/"+room+"/messages",
		url.Values{"authenticity_token": {p.token}, "body": {body}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// startCable serves the Rails example (production) with the admin API and
// returns the server, the admin URL and the app's directory.
func startCable(t *testing.T, env []string, args ...string) (*server, string, string) {
	t.Helper()
	dir, env := railsApp(t, append([]string{"RUVOY_TEST_PROBES=1"}, env...)...)
	adminPort := freePort(t)
	s := startRails(t, dir, env, append([]string{"--admin-port", adminPort}, args...)...)
	return s, "http://127.0.0.1:" + adminPort, dir
}

// cableFinished counts the WebSocket connections Action Cable saw end, in
// the app's log: log/production.log (Rails 6.1), or the server's stdout
// (Rails 7.2 logs to STDOUT).
func cableFinished(t testing.TB, s *server, dir string) int {
	log := s.stdout.String()
	if b, err := os.ReadFile(filepath.Join(dir, "log", "production.log")); err == nil {
		log = string(b)
	}
	return strings.Count(log, `Finished "/cable/" [WebSocket]`) + strings.Count(log, `Finished "/cable" [WebSocket]`) // 6.1, 7.2
}

// One process, the async adapter: subscribers to a room get each
// broadcast byte for byte, those of another room do not; a subscriber
// that vanishes leaves the others served; once all close, no hijacked
// connection is left.
func TestCableAsync(t *testing.T) {
	s, admin, dir := startCable(t, nil)
	a, b := dialCable(t, s, s.url), dialCable(t, s, s.url)
	a.subscribe(lobby)
	b.subscribe(lobby)
	other := dialCable(t, s, s.url)
	other.subscribe(`{"channel":"RoomChannel","room":"other"}`)
	gone := dialCable(t, s, s.url)
	gone.subscribe(lobby)
	eventually(t, 10*time.Second, "the gauge counts the connections", func() bool { // counted every 250 ms
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "4"
	})

	p := newPoster(t, s, "lobby")
	equal(t, "POST status", p.post(t, "lobby", trickyBody), 204)
	want := roomMessage("lobby", trickyJSON)
	for _, c := range []*cableClient{a, b, gone} {
		equal(t, "broadcast", c.next(), want)
	}

	gone.reset()
	eventually(t, 30*time.Second, "the vanished subscriber's connection ends", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "3"
	})
	eventually(t, 30*time.Second, "Action Cable drops the vanished subscriber", func() bool {
		return cableFinished(t, s, dir) == 1
	})
	for i := 0; i < 5; i++ {
		body := fmt.Sprintf("after the reset %d", i)
		equal(t, "POST status", p.post(t, "lobby", body), 204)
		for _, c := range []*cableClient{a, b} {
			equal(t, "broadcast", c.next(), roomMessage("lobby", `"`+body+`"`))
		}
	}
	equal(t, "POST to other", p.post(t, "other", "elsewhere"), 204)
	equal(t, "other room's first message", other.next(), roomMessage("other", `"elsewhere"`))
	a.quiet(500 * time.Millisecond)

	// Refusals: a malformed room, an empty body.
	rejected := `{"channel":"RoomChannel","room":"No Such Room"}`
	a.send(`{"command":"subscribe","identifier":` + jsonString(rejected) + `}`)
	equal(t, "answer to a bad room", a.next(), `{"identifier":`+jsonString(rejected)+`,"type":"reject_subscription"}`)
	equal(t, "POST an empty body", p.post(t, "lobby", " "), 422)

	for _, c := range []*cableClient{a, b, other} {
		c.close()
	}
	eventually(t, 30*time.Second, "no hijacked connection left", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
	})
	eventually(t, 30*time.Second, "Action Cable saw every connection end", func() bool {
		return cableFinished(t, s, dir) == 4
	})
	equal(t, "still serving", s.get(t, "/articles").status, 200)

	// The page's script, from the actioncable gem, as a <script> tag asks
	// for it (not XHR: Rails' cross-origin JavaScript check applies).
	js := s.get(t, "/action_cable.js")
	equal(t, "GET /action_cable.js", js.status, 200)
	equal(t, "its type", js.header.Get("Content-Type"), "text/javascript")
	mustContain(t, "/action_cable.js", js.body, "createConsumer")
}

// Under Puma, the same app answers the same, frame for frame and in
// order: the 101's head byte for byte, the welcome, two confirmations,
// broadcasts to two rooms, a rejection, and nothing from a room left.
func TestCableMatchesPuma(t *testing.T) {
	ours, _, _ := startCable(t, nil)
	dir, env := railsApp(t)
	theirs := &server{t: t, url: puma(t, dir, "config.ru", env)}
	theirs.addr = strings.TrimPrefix(theirs.url, "http://")
	const other = `{"channel":"RoomChannel","room":"other"}`
	const rejected = `{"channel":"RoomChannel","room":"No Such Room"}`
	command := func(what, identifier string) string {
		return `{"command":"` + what + `","identifier":` + jsonString(identifier) + `}`
	}
	conversation := func(s *server) []string {
		got := []string{cableUpgradeHead(t, s)}
		c := dialCable(t, s, s.url)
		for _, id := range []string{lobby, other} {
			c.send(command("subscribe", id))
			got = append(got, c.next())
		}
		p := newPoster(t, s, "lobby")
		for _, post := range [][2]string{{"lobby", trickyBody}, {"lobby", "second"}, {"other", "elsewhere"}} {
			equal(t, "POST status", p.post(t, post[0], post[1]), 204)
			got = append(got, c.next())
		}
		c.send(command("subscribe", rejected))
		got = append(got, c.next())
		// Left: the lobby's next broadcast does not come, the other's does.
		c.send(command("unsubscribe", lobby))
		c.quiet(500 * time.Millisecond)
		equal(t, "POST status", p.post(t, "lobby", "after leaving"), 204)
		equal(t, "POST status", p.post(t, "other", "last"), 204)
		return append(got, c.next())
	}
	ourFrames, theirFrames := conversation(ours), conversation(theirs)
	equal(t, "frames", len(ourFrames), len(theirFrames))
	for i := range ourFrames {
		equal(t, fmt.Sprintf("frame %d, ruvoy against Puma", i), ourFrames[i], theirFrames[i])
	}
	equal(t, "the last frame", ourFrames[len(ourFrames)-1], roomMessage("other", `"last"`))
}

// cableUpgradeHead opens /cable by hand, as a page of s would, and returns
// the 101's head as it came.
func cableUpgradeHead(t *testing.T, s *server) string {
	t.Helper()
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET /cable HTTP/1.1\r\nHost: %s\r\nOrigin: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: actioncable-v1-json, actioncable-unsupported\r\n\r\n",
		s.addr, s.url, wsKey)
	br := bufio.NewReader(c)
	var head strings.Builder
	for !strings.HasSuffix(head.String(), "\r\n\r\n") {
		b, err := br.ReadByte()
		if err != nil {
			t.Fatalf("reading the 101: %v (got %q)", err, head.String())
		}
		head.WriteByte(b)
	}
	mustContain(t, "the 101", head.String(), "HTTP/1.1 101 ")
	return head.String()
}

// Origins: the page's own (the Host's) and those in CABLE_ALLOWED_ORIGINS
// are let in; any other is refused before the upgrade.
func TestCableOrigins(t *testing.T) {
	s, _, _ := startCable(t, []string{"CABLE_ALLOWED_ORIGINS=http://app.example, https://app.example"})
	dialCable(t, s, s.url).subscribe(lobby)
	dialCable(t, s, "https://app.example").subscribe(lobby)
	for _, origin := range []string{"http://evil.example", "http://localhost:1", "null"} {
		if c, err := tryCable(s, origin); err == nil {
			c.ws.CloseNow()
			t.Fatalf("Origin %s was let in", origin)
		} else if !strings.Contains(err.Error(), "status 404") {
			t.Fatalf("Origin %s: %v, want a 404", origin, err)
		}
	}
}

// Two workers, the postgresql adapter (LISTEN/NOTIFY): subscribers on
// both workers get every broadcast, whichever worker takes the POST; a
// subscriber that vanishes leaves the others served. With the async
// adapter, half of them would get nothing.
func TestCableWorkersPostgres(t *testing.T) {
	db := startPostgres(t, "cable")
	s, admin, dir := startCable(t, []string{"DATABASE_URL=" + db, "CABLE_ADAPTER=postgresql"}, "-w", "2")
	var subs []*cableClient
	pids := map[string]int{}
	for len(subs) < 6 || len(pids) < 2 {
		if len(subs) == 20 {
			t.Fatalf("20 connections, all on one worker: %v", pids)
		}
		c := dialCable(t, s, s.url)
		pids[c.workerPid()]++
		c.subscribe(lobby)
		subs = append(subs, c)
	}
	t.Logf("subscribers per worker: %v", pids)

	// Several posters: their requests go to either worker.
	var posters []*poster
	for i := 0; i < 4; i++ {
		posters = append(posters, newPoster(t, s, "lobby"))
	}
	for i, p := range posters {
		body := trickyBody
		if i > 0 {
			body = fmt.Sprintf("message %d", i)
		}
		equal(t, "POST status", p.post(t, "lobby", body), 204)
	}
	want := []string{roomMessage("lobby", trickyJSON)}
	for i := 1; i < len(posters); i++ {
		want = append(want, roomMessage("lobby", fmt.Sprintf(`"message %d"`, i)))
	}
	for _, c := range subs {
		c.expectAll(want)
	}

	subs[0].reset()
	subs = subs[1:]
	eventually(t, 30*time.Second, "the vanished subscriber's connection ends", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == fmt.Sprint(len(subs))
	})
	var wg sync.WaitGroup
	for i, p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := inGoroutine(t)
			if status := p.post(t, "lobby", fmt.Sprintf("after the reset %d", i)); status != 204 {
				t.Errorf("POST status %d", status)
			}
		}()
	}
	wg.Wait()
	want = want[:0]
	for i := range posters {
		want = append(want, roomMessage("lobby", fmt.Sprintf(`"after the reset %d"`, i)))
	}
	for _, c := range subs {
		c.expectAll(want)
	}

	for _, c := range subs {
		c.close()
	}
	eventually(t, 30*time.Second, "no hijacked connection left", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
	})
	eventually(t, 30*time.Second, "the workers' Action Cable saw every connection end", func() bool {
		return cableFinished(t, s, dir) == len(subs)+1
	})
}

// A page in headless Chromium, driven over the DevTools protocol: the
// room's page loads Action Cable's client, subscribes, and shows a
// broadcast POSTed from here and one sent from its own form.
func TestCableChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	need(t, err == nil, "chromium (make setup-test installs it)")
	s, admin, _ := startCable(t, nil)
	b := startChromium(t, bin)
	b.open(s.url + "/rooms/lobby")
	b.waitFor("the page is subscribed", `document.getElementById("status")?.textContent`, "subscribed")
	eventually(t, 10*time.Second, "the gauge counts the connections", func() bool { // counted every 250 ms
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "1"
	})

	shown := `JSON.stringify(Array.from(document.querySelectorAll("#messages li"), li => li.textContent))`
	equal(t, "POST status", newPoster(t, s, "lobby").post(t, "lobby", trickyBody), 204)
	b.waitFor("the page shows the broadcast", shown, `["héllo <b>\"cable\"</b> & ☃"]`)
	if _, err := b.eval(`document.getElementById("body").value = "sent from the page"; document.querySelector("#say button").click()`); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the page shows its own message", shown, `["héllo <b>\"cable\"</b> & ☃","sent from the page"]`)

	b.closePage()
	eventually(t, 30*time.Second, "no hijacked connection left", func() bool {
		return metricValue(t, admin, "ruvoy_hijacked_connections") == "0"
	})
}

// chromium is a headless Chromium and a DevTools protocol session with
// one page (flat sessions over the browser's WebSocket).
type chromium struct {
	t       testing.TB
	ws      *websocket.Conn
	nextID  int
	target  string
	session string
}

// startChromium runs headless Chromium with a throwaway profile and
// connects to its DevTools endpoint, which it prints on stderr.
func startChromium(t testing.TB, bin string, flags ...string) *chromium {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--remote-debugging-port=0", "--user-data-dir=" + t.TempDir(), "about:blank"}, flags...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &output{}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", logs)
		}
	})
	endpoint := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "DevTools listening on "); ok {
				endpoint <- u
			}
			fmt.Fprintln(logs, sc.Text())
		}
	}()
	var u string
	select {
	case u = <-endpoint:
	case <-time.After(60 * time.Second):
		t.Fatal("chromium printed no DevTools endpoint within 60s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &chromium{t: t, ws: ws}
}

// call sends a command (to the page's session once there is one) and
// returns its result or its error; events in between are skipped.
func (b *chromium) call(method string, params map[string]any) (map[string]any, error) {
	b.t.Helper()
	b.nextID++
	msg := map[string]any{"id": b.nextID, "method": method, "params": params}
	if b.session != "" {
		msg["sessionId"] = b.session
	}
	out, _ := json.Marshal(msg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.ws.Write(ctx, websocket.MessageText, out); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	for {
		_, in, err := b.ws.Read(ctx)
		if err != nil {
			b.t.Fatalf("%s: %v", method, err)
		}
		var res struct {
			ID     int            `json:"id"`
			Result map[string]any `json:"result"`
			Error  map[string]any `json:"error"`
		}
		if err := json.Unmarshal(in, &res); err != nil {
			b.t.Fatal(err)
		}
		if res.ID != b.nextID {
			continue
		}
		if res.Error != nil {
			return nil, fmt.Errorf("%s: %v", method, res.Error)
		}
		return res.Result, nil
	}
}

func (b *chromium) mustCall(method string, params map[string]any) map[string]any {
	b.t.Helper()
	r, err := b.call(method, params)
	if err != nil {
		b.t.Fatal(err)
	}
	return r
}

// open opens url in a new page and attaches to it.
func (b *chromium) open(url string) {
	b.t.Helper()
	b.target, _ = b.mustCall("Target.createTarget", map[string]any{"url": url})["targetId"].(string)
	b.session, _ = b.mustCall("Target.attachToTarget", map[string]any{"targetId": b.target, "flatten": true})["sessionId"].(string)
	if b.session == "" {
		b.t.Fatal("no DevTools session for the page")
	}
}

// eval evaluates a JavaScript expression in the page; its value as a
// string ("" if it is not one). It fails while the page is still being
// navigated to (no context), so polls ignore its errors.
func (b *chromium) eval(expr string) (string, error) {
	b.t.Helper()
	r, err := b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	if err != nil {
		return "", err
	}
	if ex, ok := r["exceptionDetails"]; ok {
		return "", fmt.Errorf("%s: %v", expr, ex)
	}
	v, _ := r["result"].(map[string]any)["value"].(string)
	return v, nil
}

// waitFor evaluates expr until its value is want (60 s at most: the page
// loads, connects and subscribes on a busy machine).
func (b *chromium) waitFor(what, expr, want string) {
	b.t.Helper()
	var got string
	var err error
	defer func() {
		if b.t.Failed() {
			b.t.Logf("%s was last %q (%v)", expr, got, err)
		}
	}()
	eventually(b.t, 60*time.Second, what, func() bool {
		got, err = b.eval(expr)
		return got == want
	})
}

func (b *chromium) closePage() {
	b.t.Helper()
	b.session = ""
	b.mustCall("Target.closeTarget", map[string]any{"targetId": b.target})
}
